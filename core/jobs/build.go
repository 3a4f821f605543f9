package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Build identifies the code that ran a task: svz's stamped version and revision, and the agent's
// own version (core.AgentConfig.Version). Each task records the build that started it and the
// builds of its later deliveries, so that a deploy of new code while jobs run is detected
// step by step (see docs/jobs.md, "Deploying while jobs run").
type Build struct {
	SVZ      string `json:"svz,omitempty"`
	Revision string `json:"revision,omitempty"`
	Agent    string `json:"agent,omitempty"`
}

// String is the build as messages name it: "agent 1.2.0, svz v0.9.1 (abc1234)".
func (b Build) String() string {
	var parts []string
	if b.Agent != "" {
		parts = append(parts, "agent "+b.Agent)
	}
	svz := b.SVZ
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		svz = strings.TrimSpace(svz + " (" + rev + ")")
	}
	if svz != "" {
		parts = append(parts, "svz "+svz)
	}
	if len(parts) == 0 {
		return "an unstamped build"
	}
	return strings.Join(parts, ", ")
}

// buildIndex returns the index of b in the task's builds, adding it when new.
func (r *record) buildIndex(b Build) int {
	for i, x := range r.Builds {
		if x == b {
			return i
		}
	}
	r.Builds = append(r.Builds, b)
	return len(r.Builds) - 1
}

func (r *record) buildOf(i int) Build {
	if i >= 0 && i < len(r.Builds) {
		return r.Builds[i]
	}
	return Build{}
}

// StartedBuild is the build that started the running job: branch on it for a change whose old
// and new code must both finish the jobs they started. Outside a work it is the zero Build.
func StartedBuild(ctx context.Context) Build {
	t := taskOf(ctx)
	if t == nil {
		return Build{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rec.buildOf(0)
}

// Patched reports whether the running job takes the new code path of change id, in the spirit
// of DBOS's Patch and Temporal's GetVersion: true for a job that reaches this point on code that
// has the patch, false for one whose earlier deliveries already went on past it on the old code
// (their steps after this point are recorded). The answer is recorded as a step (one write, the
// first time), so every later delivery takes the same path. Remove the call, with the old path,
// once no job that started before the patch runs any more.
func Patched(ctx context.Context, id string) (bool, error) {
	t := taskOf(ctx)
	if t == nil {
		return false, ErrNotInWork
	}
	name := "patch:" + id
	if err := t.open(name); err != nil {
		return false, err
	}
	if st, ok := t.recorded(name); ok {
		var v bool
		if err := json.Unmarshal(st.Result, &v); err != nil {
			return false, Permanent(fmt.Errorf("jobs: the recorded answer of Patched(%q) does not decode: %w", id, err))
		}
		return v, nil
	}
	// Old code went past this point when steps it recorded later are still ahead of the work.
	patched := !t.pendingReplay()
	res, _ := json.Marshal(patched)
	if _, err := t.record(ctx, &stepRecord{Name: name, Status: stepCompleted, Result: res, Hidden: true}); err != nil {
		return false, err
	}
	return patched, nil
}
