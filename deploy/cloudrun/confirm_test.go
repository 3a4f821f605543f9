package cloudrun_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/supervaize/svz/deploy"
)

// TestUpConfirmsThePlan: up plans first and asks Confirm with the changes, before it changes
// anything; a refusal stops it there; an up that changes nothing does not ask.
func TestUpConfirmsThePlan(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	gen := func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, true }
	var asked []string
	var shown [][]deploy.Change
	confirm := func(answer error) func(context.Context, string, []deploy.Change) error {
		return func(_ context.Context, q string, cs []deploy.Change) error {
			asked, shown = append(asked, q), append(shown, cs)
			return answer
		}
	}

	d := e.deployer("v1", gen)
	d.Confirm = confirm(errors.New("cancelled: not confirmed"))
	_, err := d.Up(ctx)
	if deploy.FailedStep(err) != deploy.StepConfirm || err.Error() != "step confirm: cancelled: not confirmed" {
		t.Fatalf("refused: %v", err)
	}
	if got := changed(e.fake.Calls()); len(got) > 0 {
		t.Fatalf("a refused up changed %q", got)
	}
	if len(asked) != 1 || asked[0] != "Apply these changes to hello-dev on cloud-run?" ||
		!slices.Contains(actions(shown[0]), "create cloud-run-service hello-dev") || !slices.Contains(actions(shown[0]), "create secret hello-dev-api-key") {
		t.Fatalf("asked %q with %q", asked, actions(shown[0]))
	}

	d = e.deployer("v1", gen)
	d.Confirm = confirm(nil)
	if _, err := d.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || e.fake.Service(svcName) == nil {
		t.Fatalf("confirmed up: asked %d times, service %v", len(asked), e.fake.Service(svcName) != nil)
	}

	d = e.deployer("v1", nil)
	d.Confirm = confirm(errors.New("must not be asked"))
	if _, err := d.Up(ctx); err != nil {
		t.Fatalf("an up that changes nothing asked: %v", err)
	}

	d = e.deployer("v1", func(c *deploy.Config) { c.RotateSecrets = true })
	d.Confirm = confirm(errors.New("no"))
	if _, err := d.Up(ctx); deploy.FailedStep(err) != deploy.StepConfirm {
		t.Fatalf("rotation: %v", err)
	}
	if q := asked[len(asked)-1]; q != "Apply these changes to hello-dev on cloud-run? Secrets are rotated: Studio must then be given the new API key." {
		t.Fatalf("rotation question %q", q)
	}
}
