package jobs

import "testing"

// TestBuildOf: a build index out of the task's builds (a record damaged, or written by a build
// the task record does not know) names no build, never panics.
func TestBuildOf(t *testing.T) {
	r := &record{Builds: []Build{{Agent: "1.0.0"}, {Agent: "1.1.0"}}}
	for i, want := range map[int]Build{-1: {}, 0: {Agent: "1.0.0"}, 1: {Agent: "1.1.0"}, 2: {}, 3: {}} {
		if got := r.buildOf(i); got != want {
			t.Errorf("buildOf(%d) = %+v, want %+v", i, got, want)
		}
	}
}
