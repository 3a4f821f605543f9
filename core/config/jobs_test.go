package config

import (
	"context"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
)

// TestQueueOnServerless: without the platform's queue maker, an agent with background work runs
// on an in-process pool only where processes keep their CPU: a plain server, or a local emulation.
func TestQueueOnServerless(t *testing.T) {
	newAgent := func(slug string) *core.Agent {
		reg, err := contract.BuildRegistration(contract.RegistrationSpec{AgentID: slug, AgentSlug: slug, DisplayName: slug,
			AgentCardURL: "/.well-known/agents/v1/" + slug + "_agent.json", ControllerURL: "/a2a", A2UICatalogVersion: "supervaizer-v2-local.0",
			Actions: []contract.ActionSpec{contract.ActionID("job.start")}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := core.NewAgent(core.AgentConfig{Name: slug, Version: "1", Registration: reg})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	agent := func() []*core.Agent {
		a := newAgent("w")
		jobs.Define(a, "w", func(context.Context, int) error { return nil })
		return []*core.Agent{a}
	}
	for _, tc := range []struct {
		env  map[string]string
		want string // "" for a pool
	}{
		{map[string]string{}, ""},
		{map[string]string{"K_SERVICE": "svc", "SUPERVAIZER_LOCAL_EMULATOR": "true"}, ""},
		{map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "AWS_SAM_LOCAL": "true"}, ""},
		{map[string]string{"K_SERVICE": "svc"}, "background work on Cloud Run (K_SERVICE is set) needs the platform's queue, which platform.Main gives the controller: " +
			"serve it with platform.Main (an image built by svz deploy does); a main of your own or a source deployment's cloudrun.Register would run nothing between requests"},
		{map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, "background work on AWS Lambda (AWS_LAMBDA_RUNTIME_API is set) needs the platform's queue, which platform.Main gives the controller: " +
			"serve it with platform.Main (an image built by svz deploy does); a main of your own or a source deployment's cloudrun.Register would run nothing between requests"},
	} {
		d, err := queue(context.Background(), func(k string) string { return tc.env[k] }, agent())
		switch {
		case tc.want == "" && (err != nil || d == nil):
			t.Errorf("%v: %v %v", tc.env, d, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%v:\n got %v\nwant %s", tc.env, err, tc.want)
		}
	}
	// The platform's queue maker wins, and an agent without work needs none.
	var called bool
	ctx := jobs.WithQueue(context.Background(), func() (jobs.Dispatcher, error) { called = true; return jobs.NewPool(), nil })
	if _, err := queue(ctx, func(string) string { return "" }, agent()); err != nil || !called {
		t.Fatalf("queue maker: %v %v", err, called)
	}
	plain := newAgent("p")
	if d, err := queue(context.Background(), func(k string) string { return map[string]string{"K_SERVICE": "s"}[k] }, []*core.Agent{plain}); d != nil || err != nil {
		t.Fatalf("no work: %v %v", d, err)
	}
}

// TestInstanceID: SUPERVAIZER_INSTANCE_ID is a name of 1 to 100 letters, digits, '.', '_', ':'
// and '-', or unset; anything else stops the start, naming the variable and what it accepts.
func TestInstanceID(t *testing.T) {
	long := strings.Repeat("a", 100)
	for _, tc := range []struct {
		value, want string
		ok          bool
	}{
		{"", "", true}, {"node-a", "node-a", true}, {"web-0.svc:8000", "web-0.svc:8000", true}, {"A_b", "A_b", true}, {long, long, true},
		{long + "a", "", false}, {"node a", "", false}, {"node#1", "", false}, {"nœud", "", false}, {"a/b", "", false},
	} {
		got, err := instanceID(func(k string) string { return map[string]string{EnvInstanceID: tc.value}[k] })
		switch {
		case tc.ok && (err != nil || got != tc.want):
			t.Errorf("%q: %q, %v", tc.value, got, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), `SUPERVAIZER_INSTANCE_ID="`+tc.value+`": must be 1 to 100 letters, digits, '.', '_', ':' or '-'`)):
			t.Errorf("%q accepted or badly refused: %v", tc.value, err)
		}
	}
	if _, err := queue(context.Background(), func(k string) string { return map[string]string{EnvInstanceID: "a b"}[k] }, nil); err != nil {
		t.Errorf("read without work: %v", err)
	}
}
