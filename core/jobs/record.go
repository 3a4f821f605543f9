package jobs

import (
	"encoding/json"
	"net/url"
	"time"

	"github.com/supervaize/svz/core/contract"
)

// Task statuses, kept in the record.
const (
	taskPending   = "pending"   // written, waiting for a delivery (or between deliveries)
	taskAwaiting  = "awaiting"  // an Await step waits for the operator's answer
	taskCompleted = "completed" // the work returned nil
	taskFailed    = "failed"    // a step kept failing, the work returned an error, or the job timed out
	taskStopped   = "stopped"   // job.stop
)

func terminal(status string) bool {
	return status == taskCompleted || status == taskFailed || status == taskStopped
}

// Step statuses, as job_state shows them.
const (
	stepActive    = contract.StateActive
	stepCompleted = contract.StateCompleted
	stepAwaiting  = contract.StateAwaiting
	stepFailed    = contract.StateFailed
)

// record is a task as the store keeps it: everything a delivery on any instance needs, and what
// job.sync projects. It is one record per job, rewritten (compare-and-swap) once per completed
// step.
type record struct {
	Format    int             `json:"format"`
	Agent     string          `json:"agent"`
	Workspace string          `json:"workspace"`
	Grant     *grantRef       `json:"grant,omitempty"`
	Job       string          `json:"job"`
	Mission   string          `json:"mission"`
	Work      string          `json:"work"`
	Input     json.RawMessage `json:"input"`
	Status    string          `json:"status"`
	Error     string          `json:"error,omitempty"`
	Created   time.Time       `json:"created"`
	Deadline  time.Time       `json:"deadline"`
	// Deliveries counts the deliveries that ran the work; Attempt is the latest message's.
	Deliveries int `json:"deliveries"`
	// Holder and LeaseUntil: the instance running the task and until when (zero: nobody).
	Holder     string    `json:"holder,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// Stop: job.stop asked the running delivery to stop.
	Stop bool `json:"stop,omitempty"`
	// Running is the step a delivery was running when the record was last written (shown as
	// active), "" between steps.
	Running string        `json:"running,omitempty"`
	Steps   []*stepRecord `json:"steps"`
	Cases   []caseRecord  `json:"cases,omitempty"`
	// Wakes are the answers jobs.Wake brought while the job was not waiting yet (its delivery
	// was recording the wait), by awaiting action: the next Await on that action takes its answer.
	Wakes map[string]json.RawMessage `json:"wakes,omitempty"`
	// NotBefore: a failed step's retry waits until then.
	NotBefore time.Time `json:"not_before,omitzero"`
}

// grantRef is what a delivery needs of the verified workspace grant of the call that started the
// task (never its token): the workspace the handlers' state and checkpoints are scoped to.
type grantRef struct {
	GrantID       string   `json:"grant_id"`
	WorkspaceSlug *string  `json:"workspace_slug,omitempty"`
	AgentID       string   `json:"agent_id,omitempty"`
	ServerID      string   `json:"server_id,omitempty"`
	Scopes        []string `json:"scopes,omitempty"`
	AgentRef      *string  `json:"agent_workspace_ref,omitempty"`
}

type stepRecord struct {
	Name     string             `json:"name"`
	Case     string             `json:"case,omitempty"`
	Title    string             `json:"title,omitempty"`
	Status   string             `json:"status"`
	Result   json.RawMessage    `json:"result,omitempty"`
	Tries    int                `json:"tries,omitempty"`
	Error    string             `json:"error,omitempty"`
	Awaiting *contract.Awaiting `json:"awaiting,omitempty"`
	Outputs  []artifactRecord   `json:"outputs,omitempty"`
}

type caseRecord struct {
	ID       string `json:"id"`
	Lane     string `json:"lane,omitempty"`
	Title    string `json:"title,omitempty"`
	Done     int    `json:"done,omitempty"`
	Total    int    `json:"total,omitempty"`
	Progress bool   `json:"progress,omitempty"`
}

type artifactRecord struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title,omitempty"`
	MediaType string `json:"media_type,omitempty"`
}

func (r *record) step(name string) *stepRecord {
	for _, s := range r.Steps {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (r *record) caseOf(id string) *caseRecord {
	for i := range r.Cases {
		if r.Cases[i].ID == id {
			return &r.Cases[i]
		}
	}
	return nil
}

// clone is a deep enough copy for a write that may be refused: the slices are copied.
func (r *record) clone() *record {
	c := *r
	c.Steps = make([]*stepRecord, len(r.Steps))
	for i, s := range r.Steps {
		cs := *s
		c.Steps[i] = &cs
	}
	c.Cases = append([]caseRecord(nil), r.Cases...)
	return &c
}

// Keys: every part escaped, so no agent, workspace or job id can reach another's records.
const keyPrefix = "jobs/v1/"

// TaskKeyPrefix starts the store key of every task record. Nothing lists them (the pool lists
// its index, under another prefix): a store may keep them out of its listing index (the
// DynamoDB store's costs a write unit per record).
const TaskKeyPrefix = keyPrefix + "t/"

func taskKey(agent, workspace, job string) string {
	return TaskKeyPrefix + url.PathEscape(agent) + "/" + url.PathEscape(workspace) + "/" + url.PathEscape(job)
}

// Message is what a queue carries for a task: its reference, never its input, parameters or
// tokens. Attempt counts the deliveries handed on (continuations and retries), for the logs.
type Message struct {
	Agent     string `json:"agent"`
	Workspace string `json:"workspace"`
	Job       string `json:"job"`
	Work      string `json:"work"`
	Attempt   int    `json:"attempt"`
}

// Key is the store key of the message's task.
func (m Message) Key() string { return taskKey(m.Agent, m.Workspace, m.Job) }

// DecodeMessage decodes a queue message's body, strictly: every member required, no other.
func DecodeMessage(body []byte) (Message, error) {
	var m Message
	if err := strictDecode(body, &m); err != nil {
		return Message{}, err
	}
	switch {
	case m.Agent == "" || m.Workspace == "" || m.Job == "" || m.Work == "":
		return Message{}, errBadMessage
	case m.Attempt < 0:
		return Message{}, errBadMessage
	}
	return m, nil
}

// Encode is the message's body.
func (m Message) Encode() []byte {
	b, _ := json.Marshal(m) // strings and an int always encode
	return b
}
