package jobs

import (
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/supervaize/svz/core/contract"
)

// Task statuses, kept in the record.
const (
	taskPending   = "pending"   // written, waiting for a delivery (or between deliveries)
	taskAwaiting  = "awaiting"  // an Await step waits for the operator's answer
	taskFailing   = "failing"   // failed for good; the failure handler (OnFailure) has yet to run
	taskCompleted = "completed" // the work returned nil
	taskFailed    = "failed"    // a step kept failing, the work returned an error, or the job timed out
	taskStopped   = "stopped"   // job.stop, or the work ended it as cancelled (Cancel)
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
	// stepSleeping is a timer's step until it fires (shown "pending", with its wake time).
	stepSleeping = "sleeping"
)

// The layout in the store (all keys under TaskKeyPrefix, every part escaped):
//
//	<task key>                 the task record: one per job, rewritten (compare-and-swap) when a
//	                           delivery claims it, renews its lease and ends, never per step
//	<task key>/s/<n>           step record n (1, 2, ...): one completed step, written once
//	                           (create-if-absent) when it completes, in completion order
//	<task key>/i/<name>/<i>    fan-out item i of Map name: its result, written once
//
// So a step costs one write whatever came before it, and a job's results together are bounded
// by the number of records, not by one record's size. Nothing lists these records (DynamoDB's
// listing index would cost a write unit per record and lag): a delivery and job.sync read step
// records 1, 2, ... by key until one is missing (the task record's Seq says how many exist, so
// most are read at once), and a fan-out reads its items by index.

// record is a task as the store keeps it: everything a delivery on any instance needs, and what
// job.sync projects with the step records.
type record struct {
	Format    int             `json:"format"`
	Agent     string          `json:"agent"`
	Workspace string          `json:"workspace"`
	Grant     *grantRef       `json:"grant,omitempty"`
	Job       string          `json:"job"`
	Mission   string          `json:"mission"`
	Work      string          `json:"work"`
	Input     json.RawMessage `json:"input"`
	// Builds are the builds that ran the task: Builds[0] started it (jobs.StartedBuild), the others
	// ran later deliveries (a step record names its build by index).
	Builds   []Build   `json:"builds,omitempty"`
	Status   string    `json:"status"`
	Error    string    `json:"error,omitempty"`
	Created  time.Time `json:"created"`
	Deadline time.Time `json:"deadline"`
	// Deliveries counts the deliveries that ran the work.
	Deliveries int `json:"deliveries"`
	// Holder and LeaseUntil: the instance running the task and until when (zero: nobody).
	Holder     string    `json:"holder,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// Stop: job.stop asked the running delivery to stop.
	Stop bool `json:"stop,omitempty"`
	// Seq is how many step records the task had at its last write (more may exist: a delivery
	// writes step records between its writes of the task).
	Seq int `json:"seq,omitempty"`
	// Open are the steps job.sync shows that have no step record: running (active), waiting for an
	// answer, sleeping, failed attempts waiting for their retry, the step that failed the job.
	Open []*stepRecord `json:"open,omitempty"`
	// Cases: cases made by Progress before any step, and the progress of each case.
	Cases []caseRecord `json:"cases,omitempty"`
	// Wakes are the answers jobs.Wake brought while the job was not waiting yet (its delivery
	// was recording the wait), by awaiting action: the next Await on that action takes its answer.
	Wakes map[string]json.RawMessage `json:"wakes,omitempty"`
	// NotBefore: the next delivery waits until then (a retry's backoff, a timer, a limit).
	NotBefore time.Time `json:"not_before,omitzero"`
	// Wait says why a pending task waits (job.sync shows it).
	Wait *waitRecord `json:"wait,omitempty"`
	// Failure: the job failed for good and its work has a failure handler (OnFailure).
	Failure *failureRecord `json:"failure,omitempty"`
	// Cancel is the label of a job the work ended as cancelled (jobs.Cancel).
	Cancel string `json:"cancel,omitempty"`
	// Retry: an operator retried the job after it failed or was stopped (Service.Retry).
	Retry *retryRecord `json:"retry,omitempty"`
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

// stepRecord is a completed step (a step record of its own) or an open one (in the task's Open).
type stepRecord struct {
	Name      string             `json:"name"`
	Case      string             `json:"case,omitempty"`
	Lane      string             `json:"lane,omitempty"`
	CaseTitle string             `json:"case_title,omitempty"`
	Title     string             `json:"title,omitempty"`
	Activity  string             `json:"activity,omitempty"`
	Status    string             `json:"status"`
	Result    json.RawMessage    `json:"result,omitempty"`
	Tries     int                `json:"tries,omitempty"`
	Error     string             `json:"error,omitempty"`
	Awaiting  *contract.Awaiting `json:"awaiting,omitempty"`
	Outputs   []artifactRecord   `json:"outputs,omitempty"`
	// By and At: who answered an Await step, and when.
	By string    `json:"by,omitempty"`
	At time.Time `json:"at,omitzero"`
	// Until: a timer's wake time.
	Until time.Time `json:"until,omitzero"`
	// Items: a fan-out's item count; Done, how many have a result (open fan-outs); ItemTries,
	// the failed attempts of its items (by index) waiting for their retry.
	Items     int         `json:"items,omitempty"`
	Done      int         `json:"done,omitempty"`
	ItemTries map[int]int `json:"item_tries,omitempty"`
	// Build is the index in the task's Builds of the build that recorded the step (0: the first).
	Build int `json:"build,omitempty"`
	// Progress: the progress of cases when the step was recorded (a Progress call is written
	// with the next write, of the task or of a step).
	Progress []caseRecord `json:"progress,omitempty"`
	// Hidden: a record of the job's path (jobs.Patched), not a step job_state shows.
	Hidden bool `json:"hidden,omitempty"`

	seq int // the record's number (step records only)
}

type caseRecord struct {
	ID       string `json:"id"`
	Lane     string `json:"lane,omitempty"`
	Title    string `json:"title,omitempty"`
	Done     int    `json:"done,omitempty"`
	Total    int    `json:"total,omitempty"`
	Progress bool   `json:"progress,omitempty"`
	// Ver orders progress written by step records and by the task record: the highest wins.
	Ver int `json:"ver,omitempty"`
}

type artifactRecord struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title,omitempty"`
	MediaType string `json:"media_type,omitempty"`
}

// waitRecord is why a pending task waits, and until when.
type waitRecord struct {
	Reason string    `json:"reason"` // waitRetry, waitTimer, waitLimit
	Step   string    `json:"step,omitempty"`
	Limit  string    `json:"limit,omitempty"`
	Until  time.Time `json:"until,omitzero"`
}

const (
	waitRetry = "retry"
	waitTimer = "timer"
	waitLimit = "limit"
)

// failureRecord is a failed job's reason, kept for its failure handler.
type failureRecord struct {
	Cause  string `json:"cause"`
	Reason string `json:"reason"`
	Step   string `json:"step,omitempty"`
	// Status is the status the task ends with once the handler ran (failed, or stopped for a
	// handler that also runs for stopped jobs).
	Status string `json:"status"`
	// Deadline bounds the handler's run (the job's own may have passed).
	Deadline time.Time `json:"deadline"`
	Tries    int       `json:"tries,omitempty"`
	Error    string    `json:"error,omitempty"`
}

func (r *record) open(name string) *stepRecord {
	for _, s := range r.Open {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (r *record) dropOpen(name string) {
	for i, s := range r.Open {
		if s.Name == name {
			r.Open = append(r.Open[:i:i], r.Open[i+1:]...)
			return
		}
	}
}

func (r *record) caseOf(id string) *caseRecord {
	for i := range r.Cases {
		if r.Cases[i].ID == id {
			return &r.Cases[i]
		}
	}
	return nil
}

// clone is a deep enough copy for a write that may be refused: the slices and maps are copied.
func (r *record) clone() *record {
	c := *r
	c.Open = make([]*stepRecord, len(r.Open))
	for i, s := range r.Open {
		c.Open[i] = s.clone()
	}
	c.Cases = append([]caseRecord(nil), r.Cases...)
	c.Builds = append([]Build(nil), r.Builds...)
	if r.Wakes != nil {
		c.Wakes = make(map[string]json.RawMessage, len(r.Wakes))
		for k, v := range r.Wakes {
			c.Wakes[k] = v
		}
	}
	if r.Wait != nil {
		w := *r.Wait
		c.Wait = &w
	}
	if r.Failure != nil {
		f := *r.Failure
		c.Failure = &f
	}
	return &c
}

func (s *stepRecord) clone() *stepRecord {
	c := *s
	if s.ItemTries != nil {
		c.ItemTries = make(map[int]int, len(s.ItemTries))
		for k, v := range s.ItemTries {
			c.ItemTries[k] = v
		}
	}
	return &c
}

// Keys: every part escaped, so no agent, workspace or job id can reach another's records.
const keyPrefix = "jobs/v1/"

// TaskKeyPrefix starts the store key of every task record, step record and fan-out item. Nothing
// lists them (the pool lists its index, under another prefix): a store may keep them out of its
// listing index (the DynamoDB store's costs a write unit per record).
const TaskKeyPrefix = keyPrefix + "t/"

func taskKey(agent, workspace, job string) string {
	return TaskKeyPrefix + url.PathEscape(agent) + "/" + url.PathEscape(workspace) + "/" + url.PathEscape(job)
}

// stepKey is the key of step record n (from 1) of the task under key.
func stepKey(key string, n int) string { return key + "/s/" + strconv.Itoa(n) }

// itemKey is the key of item i of the fan-out name of the task under key.
func itemKey(key, name string, i int) string {
	return key + "/i/" + url.PathEscape(name) + "/" + strconv.Itoa(i)
}

// Message is what a queue carries for a task: its reference, never its input, parameters or
// tokens. Attempt counts the deliveries handed on (continuations and retries), for the logs. At
// is when a delayed message is due (Unix milliseconds; 0: at once): a queue that holds messages
// back for less time than asked (SQS: 15 minutes) delivers it early, and the delivery hands it
// on again until then.
type Message struct {
	Agent     string `json:"agent"`
	Workspace string `json:"workspace"`
	Job       string `json:"job"`
	Work      string `json:"work"`
	Attempt   int    `json:"attempt"`
	At        int64  `json:"at,omitempty"`
}

// Key is the store key of the message's task.
func (m Message) Key() string { return taskKey(m.Agent, m.Workspace, m.Job) }

// DecodeMessage decodes a queue message's body, strictly: every member but at required, no
// other.
func DecodeMessage(body []byte) (Message, error) {
	var m Message
	if err := strictDecode(body, &m); err != nil {
		return Message{}, err
	}
	switch {
	case m.Agent == "" || m.Workspace == "" || m.Job == "" || m.Work == "":
		return Message{}, errBadMessage
	case m.Attempt < 0 || m.At < 0:
		return Message{}, errBadMessage
	}
	return m, nil
}

// Encode is the message's body.
func (m Message) Encode() []byte {
	b, _ := json.Marshal(m) // strings and ints always encode
	return b
}
