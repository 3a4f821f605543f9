package contract

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Effect types the seeds and the reference SDK use. An agent may use its own types too; Studio
// shows unknown ones generically.
const (
	EffectJobStarted            = "job.started"             // job.start
	EffectJobStartPreviewed     = "job.start.previewed"     // job.start.preview
	EffectJobSynced             = "job.synced"              // job.sync
	EffectStepAwaitingSubmitted = "step.awaiting.submitted" // step.awaiting.submit
	EffectResourceListed        = "resource.listed"         // resource.<id>.list: resource, items
	EffectDatasetQueried        = "dataset.queried"         // dataset.<id>.query: dataset, count, rows
	EffectRuleCheckpointResumed = "rule.checkpoint.resumed" // rule.checkpoint.resume
	EffectActionUnsupported     = "action.unsupported"      // an action the agent does not run
)

// Effect types svz's examples use where the seeds name none (conventions, not protocol).
const (
	EffectJobStopped      = "job.stopped"       // job.stop
	EffectResourceGot     = "resource.got"      // resource.<id>.get: resource, item
	EffectResourceCreated = "resource.created"  // resource.<id>.create: resource, item
	EffectResourceUpdated = "resource.updated"  // resource.<id>.update: resource, item
	EffectResourceDeleted = "resource.deleted"  // resource.<id>.delete: resource, item
	EffectResourceImport  = "resource.imported" // resource.<id>.import: resource, count, errors
	EffectArtifactLoaded  = "artifact.loaded"   // artifact.get: artifact_id, data
)

// Lifecycle statuses of jobs, cases and steps: free strings on the wire; these are the values
// Studio renders (seed 000, "Étape"). Action results use StatusOK and StatusError instead.
const (
	StatePending   = "pending"
	StateActive    = "active"
	StateAwaiting  = "awaiting"
	StateCompleted = "completed"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// Awaiting reasons.
const (
	// AwaitingHumanInput is the reason of a step waiting for an operator's answer.
	AwaitingHumanInput = "human_input"
)

// Well-known surfaces (seed 000, "Surfaces").
const (
	SurfaceJobStart       = "job.start"
	SurfaceStepAwaiting   = "case.step.awaiting"
	SurfaceStepDetail     = "case.step.detail"
	SurfaceMissionMetrics = "mission.analytics"
	SurfaceJobAnalytics   = "job.analytics"
	SurfaceConfigurator   = "job.configurator"
	SurfaceAgentOverview  = "mission.agent.overview"
)

// Well-known actions not declared elsewhere (seed 000, "Actions").
const (
	JobStopAction     = "job.stop"
	ArtifactGetAction = "artifact.get"
)

// checkShapes reports an Item that does not encode as a JSON object, or Items or Rows that do
// not encode as a list of objects. It looks at Go types, without encoding.
func (e *Effect) checkShapes() error {
	if e.Item != nil && !objectValue(reflect.ValueOf(e.Item)) {
		return fmt.Errorf("item must encode as a JSON object, not %T", e.Item)
	}
	for _, f := range []struct {
		name string
		v    any
	}{{"items", e.Items}, {"rows", e.Rows}} {
		if f.v == nil {
			continue
		}
		if err := objectList(f.name, reflect.ValueOf(f.v)); err != nil {
			return err
		}
	}
	return nil
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// objectValue reports whether v encodes as a JSON object: a map with string keys, a struct, a
// JSON object held in a json.RawMessage, or a non-nil pointer or interface to one of those.
func objectValue(v reflect.Value) bool {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	switch {
	case v.Type() == rawMessageType:
		return isObjectJSON(v.Bytes())
	case v.Kind() == reflect.Struct:
		return true
	case v.Kind() == reflect.Map:
		return v.Type().Key().Kind() == reflect.String
	}
	return false
}

func objectList(name string, v reflect.Value) error {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return fmt.Errorf("%s must encode as a list of JSON objects, not null", name)
		}
		v = v.Elem()
	}
	if v.Type() == rawMessageType || (v.Kind() != reflect.Slice && v.Kind() != reflect.Array) {
		return fmt.Errorf("%s must be a slice of objects, not %s", name, v.Type())
	}
	for i := range v.Len() {
		if !objectValue(v.Index(i)) {
			return fmt.Errorf("%s[%d] must encode as a JSON object, not %s", name, i, v.Index(i).Type())
		}
	}
	return nil
}

// isNilSlice reports whether v holds a nil slice (other than a json.RawMessage).
func isNilSlice(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Slice && rv.IsNil() && rv.Type() != rawMessageType
}

// emptyIfNilSlice returns [] for a nil slice held in v, v otherwise.
func emptyIfNilSlice(v any) any {
	if v == nil {
		return nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice && rv.IsNil() && rv.Type() != rawMessageType {
		return json.RawMessage("[]")
	}
	return v
}

// OK is a successful result with the given effects.
func OK(effects ...Effect) *ActionResult {
	if effects == nil {
		effects = []Effect{}
	}
	return &ActionResult{Status: StatusOK, Effects: effects}
}

// Fail is a business failure: status "error" with one error. Unlike a refusal (Refuse), it is
// recorded against the idempotency key like any answer.
func Fail(code, message string) *ActionResult {
	return &ActionResult{Status: StatusError, Effects: []Effect{}, Errors: []ResultError{{Code: code, Message: message}}}
}

// WithJobState sets the result's job_state and returns the result.
func (r *ActionResult) WithJobState(s *JobState) *ActionResult {
	r.JobState = s
	return r
}
