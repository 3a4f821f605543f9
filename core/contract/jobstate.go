package contract

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// JobState is a full snapshot of a job as the agent sees it (V2JobStateSnapshot). Studio
// materializes its cases and steps at once and converges later through job.sync.
type JobState struct {
	Job   Job    `json:"job"`
	Cases []Case `json:"cases" wire:"nonnil"`
	Extra Extra  `json:"-"`
}

// Job source types.
const (
	SourceFreshStart = "fresh_start"
	SourceExternal   = "external"
)

// Job is the job part of a snapshot. It is an open model: Studio also reads Display and
// Information (the job's cost).
type Job struct {
	ID        string      `json:"id"`
	AgentSlug string      `json:"agent_slug"`
	MissionID string      `json:"mission_id"`
	Status    string      `json:"status"` // free string: pending, active, awaiting, completed, failed...
	Source    JobSource   `json:"source"`
	Display   *JobDisplay `json:"display,omitzero"`
	// Information carries the job's cost (information.cost.total_cost): Studio sums the steps'
	// costs into each case's, but takes the job's from here. Cost(total) builds it.
	Information *JobInformation `json:"information,omitzero"`
	Extra       Extra           `json:"-"`
}

// JobInformation is the job's information block; Studio reads its cost.
type JobInformation struct {
	Cost  *JobCost `json:"cost,omitzero"`
	Extra Extra    `json:"-"`
}

// JobCost is the job's cost, in the unit the agent bills in: Currency names it (an ISO 4217
// code such as "EUR", or the agent's own unit such as "credits"); omitted when empty.
type JobCost struct {
	TotalCost float64 `json:"total_cost"`
	Currency  string  `json:"currency,omitzero"`
	Extra     Extra   `json:"-"`
}

// Cost is the information block of a job that cost total: Job{…, Information: contract.Cost(3)}
// is written "information": {"cost": {"total_cost": 3}}.
func Cost(total float64) *JobInformation {
	return &JobInformation{Cost: &JobCost{TotalCost: total}}
}

// CostIn is Cost with the cost's currency: contract.CostIn(12.5, "EUR") is written
// "information": {"cost": {"total_cost": 12.5, "currency": "EUR"}}.
func CostIn(total float64, currency string) *JobInformation {
	return &JobInformation{Cost: &JobCost{TotalCost: total, Currency: currency}}
}

// JobDisplay is the agent's vocabulary for job lists and the job title line; each text is at
// most 120 characters. Studio replaces it on every job_state it receives.
type JobDisplay struct {
	EntityLabel        string `json:"entity_label,omitzero"`
	StateLabel         string `json:"state_label,omitzero"`
	PrimaryActionLabel string `json:"primary_action_label,omitzero"`
	Extra              Extra  `json:"-"`
}

// JobDisplayMaxLength bounds each JobDisplay text.
const JobDisplayMaxLength = 120

// JobSource tells Studio where the job came from.
type JobSource struct {
	Type          string `json:"type"` // fresh_start or external
	ExternalRef   string `json:"external_ref,omitzero"`
	PreviousJobID string `json:"previous_job_id,omitzero"`
	TargetType    string `json:"target_type,omitzero"`
	Extra         Extra  `json:"-"`
}

// DefaultLane is the lane of a case that declares none.
const DefaultLane = "work"

// Case is a unit of work inside a job. An empty Lane is written as "work"; metadata and steps are
// always written.
type Case struct {
	ID         string         `json:"id"`
	Lane       string         `json:"lane"`
	Title      string         `json:"title,omitzero"`
	Status     string         `json:"status,omitzero"`
	ExternalID string         `json:"external_id,omitzero"`
	Metadata   map[string]any `json:"metadata" wire:"nonnil"`
	Steps      []Step         `json:"steps" wire:"nonnil"`
	Extra      Extra          `json:"-"`
}

// Step activities. Human review is not an activity: it is Status "awaiting" plus Awaiting.
const (
	ActivityOperation  = "operation"
	ActivityDelegation = "delegation"
)

// Step is an observable activity inside a case.
type Step struct {
	ID         string        `json:"id"`
	Activity   string        `json:"activity"`
	Status     string        `json:"status"`
	Title      string        `json:"title,omitzero"`
	ExternalID string        `json:"external_id,omitzero"`
	Awaiting   *Awaiting     `json:"awaiting,omitzero"`
	Outputs    []ArtifactRef `json:"outputs" wire:"nonnil"`
	Extra      Extra         `json:"-"`
}

// Awaiting is the human-in-the-loop state of a step: what Studio must collect from the operator,
// through which surface and action. Reopenable says whether an answered step may be submitted
// again.
type Awaiting struct {
	Reason     string            `json:"reason"`
	Surface    string            `json:"surface"`
	Action     string            `json:"action"`
	Fields     []FieldDefinition `json:"fields" wire:"nonnil"`
	Reopenable bool              `json:"reopenable"`
	Extra      Extra             `json:"-"`
}

// ArtifactRef references an output the agent owns. Studio-stored artifacts add
// "storage": "studio" and "file_id" (keep them in Extra).
type ArtifactRef struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title,omitzero"`
	ExternalID string `json:"external_id,omitzero"`
	MediaType  string `json:"media_type,omitzero"`
	Extra      Extra  `json:"-"`
}

// Validate reports why s is not a valid snapshot, or nil.
func (s *JobState) Validate() error {
	var errs []error
	j := s.Job
	for _, f := range []struct{ name, v string }{{"job.id", j.ID}, {"job.agent_slug", j.AgentSlug}, {"job.mission_id", j.MissionID}, {"job.status", j.Status}} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s is required", f.name))
		}
	}
	if j.Source.Type != SourceFreshStart && j.Source.Type != SourceExternal {
		errs = append(errs, fmt.Errorf("job.source.type must be %q or %q, not %q", SourceFreshStart, SourceExternal, j.Source.Type))
	}
	if d := j.Display; d != nil {
		for _, f := range []struct{ name, v string }{{"entity_label", d.EntityLabel}, {"state_label", d.StateLabel}, {"primary_action_label", d.PrimaryActionLabel}} {
			if utf8.RuneCountInString(f.v) > JobDisplayMaxLength {
				errs = append(errs, fmt.Errorf("job.display.%s must be at most %d characters", f.name, JobDisplayMaxLength))
			}
		}
	}
	for i, c := range s.Cases {
		if c.ID == "" {
			errs = append(errs, fmt.Errorf("cases[%d].id is required", i))
		}
		for k, st := range c.Steps {
			at := stepPath{i, k}
			if st.ID == "" {
				errs = append(errs, fmt.Errorf("%s.id is required", at))
			}
			if st.Activity != ActivityOperation && st.Activity != ActivityDelegation {
				errs = append(errs, fmt.Errorf("%s.activity must be %q or %q, not %q", at, ActivityOperation, ActivityDelegation, st.Activity))
			}
			if st.Status == "" {
				errs = append(errs, fmt.Errorf("%s.status is required", at))
			}
			if a := st.Awaiting; a != nil {
				if a.Reason == "" || a.Surface == "" || a.Action == "" {
					errs = append(errs, fmt.Errorf("%s.awaiting needs reason, surface and action", at))
				}
				for n, f := range a.Fields {
					if err := f.Validate(); err != nil {
						errs = append(errs, fmt.Errorf("%s.awaiting.fields[%d]: %w", at, n, err))
					}
				}
			}
			for n, o := range st.Outputs {
				if o.ID == "" || o.Type == "" {
					errs = append(errs, fmt.Errorf("%s.outputs[%d] needs id and type", at, n))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// stepPath names a step in errors; formatted only when an error is reported.
type stepPath struct{ c, s int }

func (p stepPath) String() string { return fmt.Sprintf("cases[%d].steps[%d]", p.c, p.s) }

// MarshalJSON writes the snapshot; cases as [] when empty.
func (s JobState) MarshalJSON() ([]byte, error) { return marshal(&s) }

func (s *JobState) wire(e *encoder) error { return e.object(s, s.Extra) }

// UnmarshalJSON decodes the snapshot, keeping unknown members.
func (s *JobState) UnmarshalJSON(data []byte) error {
	type plain JobState
	return decodeInto(data, "job_state", (*plain)(s), &s.Extra)
}

// MarshalJSON writes the job with its unknown members.
func (j Job) MarshalJSON() ([]byte, error) { return marshal(&j) }

func (j *Job) wire(e *encoder) error { return e.object(j, j.Extra) }

// UnmarshalJSON decodes the job, keeping unknown members.
func (j *Job) UnmarshalJSON(data []byte) error {
	type plain Job
	return decodeInto(data, "job", (*plain)(j), &j.Extra)
}

// MarshalJSON writes the display block with its unknown members.
func (d JobDisplay) MarshalJSON() ([]byte, error) { return marshal(&d) }

func (d *JobDisplay) wire(e *encoder) error { return e.object(d, d.Extra) }

// MarshalJSON writes the information block with its unknown members.
func (i JobInformation) MarshalJSON() ([]byte, error) { return marshal(&i) }

func (i *JobInformation) wire(e *encoder) error { return e.object(i, i.Extra) }

// UnmarshalJSON decodes the information block, keeping unknown members.
func (i *JobInformation) UnmarshalJSON(data []byte) error {
	type plain JobInformation
	return decodeInto(data, "job information", (*plain)(i), &i.Extra)
}

// MarshalJSON writes the cost with its unknown members.
func (c JobCost) MarshalJSON() ([]byte, error) { return marshal(&c) }

func (c *JobCost) wire(e *encoder) error { return e.object(c, c.Extra) }

// UnmarshalJSON decodes the cost, keeping unknown members.
func (c *JobCost) UnmarshalJSON(data []byte) error {
	type plain JobCost
	return decodeInto(data, "job cost", (*plain)(c), &c.Extra)
}

// UnmarshalJSON decodes the display block, keeping unknown members.
func (d *JobDisplay) UnmarshalJSON(data []byte) error {
	type plain JobDisplay
	return decodeInto(data, "job display", (*plain)(d), &d.Extra)
}

// MarshalJSON writes the source with its unknown members.
func (s JobSource) MarshalJSON() ([]byte, error) { return marshal(&s) }

func (s *JobSource) wire(e *encoder) error { return e.object(s, s.Extra) }

// UnmarshalJSON decodes the source, keeping unknown members.
func (s *JobSource) UnmarshalJSON(data []byte) error {
	type plain JobSource
	return decodeInto(data, "job source", (*plain)(s), &s.Extra)
}

// MarshalJSON writes the case: lane "work" when empty, metadata {} and steps [] when empty.
func (c Case) MarshalJSON() ([]byte, error) { return marshal(&c) }

func (c *Case) wire(e *encoder) error {
	if c.Lane == "" {
		p := *c
		p.Lane = DefaultLane
		c = &p
	}
	return e.object(c, c.Extra)
}

// UnmarshalJSON decodes the case, keeping unknown members.
func (c *Case) UnmarshalJSON(data []byte) error {
	type plain Case
	return decodeInto(data, "case", (*plain)(c), &c.Extra)
}

// MarshalJSON writes the step; outputs as [] when empty.
func (s Step) MarshalJSON() ([]byte, error) { return marshal(&s) }

func (s *Step) wire(e *encoder) error { return e.object(s, s.Extra) }

// UnmarshalJSON decodes the step, keeping unknown members.
func (s *Step) UnmarshalJSON(data []byte) error {
	type plain Step
	return decodeInto(data, "step", (*plain)(s), &s.Extra)
}

// MarshalJSON writes the awaiting block; fields as [] when empty. Fields without a type are
// boolean here (the reference's awaiting-field default).
func (a Awaiting) MarshalJSON() ([]byte, error) { return marshal(&a) }

func (a *Awaiting) wire(e *encoder) error {
	p := *a
	p.Fields = make([]FieldDefinition, len(a.Fields))
	for i, f := range a.Fields {
		f.Type = orDefault(f.Type, FieldBoolean)
		p.Fields[i] = f
	}
	return e.object(&p, a.Extra)
}

// UnmarshalJSON decodes the awaiting block, keeping unknown members.
func (a *Awaiting) UnmarshalJSON(data []byte) error {
	type plain Awaiting
	return decodeInto(data, "awaiting", (*plain)(a), &a.Extra)
}

// MarshalJSON writes the reference with its unknown members.
func (r ArtifactRef) MarshalJSON() ([]byte, error) { return marshal(&r) }

func (r *ArtifactRef) wire(e *encoder) error { return e.object(r, r.Extra) }

// UnmarshalJSON decodes the reference, keeping unknown members.
func (r *ArtifactRef) UnmarshalJSON(data []byte) error {
	type plain ArtifactRef
	return decodeInto(data, "artifact ref", (*plain)(r), &r.Extra)
}
