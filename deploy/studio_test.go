package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/devstudio"
)

// TestLambdaStudioRegistration deploys Hello World Studio-connected to a local Studio stand-in,
// with moto_server as AWS: plan shows the registration, up registers the function's URL as its
// last step and writes the outcome into the function's configuration (a new version, gated on
// health), the function's own binary then accepts the stand-in's tokens and decrypts the
// parameter it sends, a second up changes nothing, and a refused handshake fails up and leaves the
// configuration serving as it was.
func TestLambdaStudioRegistration(t *testing.T) {
	ctx := context.Background()
	s, err := devstudio.Start(ctx, devstudio.Config{Parameters: map[string]map[string]string{hello.Slug: {"HELLO_GREETING": "Salut"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host := s.Env("", "")
	delete(host, "SUPERVAIZER_PUBLIC_URL")
	host["SUPERVAIZER_LOG_LEVEL"] = "DEBUG"
	r := newLambdaRig(t, "studio", host)
	svc, lam, gate, newDeployer := r.svc, r.lam, r.gate, r.deployer

	plan, err := newDeployer(nil).Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := findChange(plan.Changes, "studio-registration"); c == nil || c.Action != deploy.Create || c.Name != devstudio.DefaultWorkspace {
		t.Fatalf("plan %+v", plan.Changes)
	}

	first, err := newDeployer(nil).Up(ctx)
	if err != nil {
		t.Fatalf("up: %v\nevents: %+v", err, r.events)
	}
	regs := s.Registrations()
	if len(regs) != 1 || regs[0].URL != first.URL {
		t.Fatalf("registrations %+v, service %s", regs, first.URL)
	}
	if first.Studio == nil || !first.Studio.Changed || first.Studio.Audience != regs[0].Audience ||
		!reflect.DeepEqual(first.Studio.AgentIDs, regs[0].AgentIDs) || first.Health == nil {
		t.Fatalf("studio %+v health %+v", first.Studio, first.Health)
	}
	if c := findChange(first.Changes, "studio-registration"); c == nil || c.Action != deploy.Update {
		t.Errorf("changes %+v", first.Changes)
	}
	vars := functionEnv(t, lam, svc)
	want := map[string]string{
		"SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE": regs[0].Audience,
		"SUPERVAIZER_STUDIO_AGENT_IDS":        hello.Slug + "=" + regs[0].AgentIDs[hello.Slug],
		"SUPERVAIZER_STUDIO_REGISTER":         "off",
		"SUPERVAIZE_WORKSPACE_ID":             devstudio.DefaultWorkspace,
		"SUPERVAIZE_API_URL":                  s.URL(),
	}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("function %s=%q, want %q", k, vars[k], v)
		}
	}
	if !strings.HasPrefix(vars["SUPERVAIZE_API_KEY_SECRET_ARN"], "arn:aws:secretsmanager:") || vars["SUPERVAIZE_API_KEY"] != "" {
		t.Errorf("the Studio key is not a secret reference: %v", vars)
	}
	for _, v := range vars {
		if strings.Contains(v, s.APIKey()) || strings.Contains(v, first.NewAPIKey.Reveal()) {
			t.Fatal("a key is in the function's plain environment")
		}
	}
	// The function's own binary: a token from the stand-in opens job.start, and the parameter the
	// stand-in encrypted to the registered key arrives decrypted.
	tok, err := s.MintToken(devstudio.TokenRequest{Workspace: devstudio.DefaultWorkspace, Agent: hello.Slug, Scopes: []string{"supervaizer/action.invoke", "job.start"}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"r1","actor":{"user_id":"u"},` +
		`"workspace":{"id":"` + s.WorkspaceID(devstudio.DefaultWorkspace) + `"},"mission_id":"m1","agent_slug":"` + hello.Slug +
		`","surface":"job.start","action":"job.start","input":{"count":1},"job_id":"job-1"}}`
	req, _ := http.NewRequest(http.MethodPost, first.URL+"/a2a", bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", first.NewAPIKey.Reveal())
	req.Header.Set("X-Supervaize-Workspace-Authorization", "Bearer "+tok.Token)
	resp, err := gate.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rpc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&rpc)
	resp.Body.Close()
	if r, _ := rpc["result"].(map[string]any); r == nil || r["effects"].([]any)[0].(map[string]any)["greeting"] != "Salut" {
		t.Fatalf("job.start through the function: %v", rpc)
	}

	// Second up: same outcome, nothing changes.
	second, err := newDeployer(nil).Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deploy.Changed(second.Changes) || second.Studio == nil || second.Studio.Changed {
		t.Errorf("second up changed %+v (studio %+v)", second.Changes, second.Studio)
	}
	plan, err = newDeployer(nil).Plan(ctx)
	if err != nil || deploy.Changed(plan.Changes) {
		t.Errorf("plan after up: %v %+v", err, plan.Changes)
	}

	// Studio refuses the handshake: up fails at step studio and the configuration stays.
	before := functionEnv(t, lam, svc)
	for _, answer := range []string{devstudio.HandshakeKeyMismatch, devstudio.HandshakeHTTP403} {
		if err := s.SetHandshake(answer); err != nil {
			t.Fatal(err)
		}
		res, err := newDeployer(nil).Up(ctx)
		if deploy.FailedStep(err) != deploy.StepStudio || res.Studio != nil {
			t.Fatalf("%s: step %q: %v", answer, deploy.FailedStep(err), err)
		}
		if strings.Contains(err.Error(), s.APIKey()) || strings.Contains(err.Error(), first.NewAPIKey.Reveal()) {
			t.Fatalf("the error holds a key: %v", err)
		}
		if after := functionEnv(t, lam, svc); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: the configuration changed:\n%v\n%v", answer, before, after)
		}
	}
	if _, err := gate.Check(ctx, first.URL, first.NewAPIKey.Reveal()); err != nil {
		t.Fatalf("the previous configuration no longer serves: %v", err)
	}
}

func findChange(cs []deploy.Change, resource string) *deploy.Change {
	for i := range cs {
		if cs[i].Resource == resource {
			return &cs[i]
		}
	}
	return nil
}

func functionEnv(t *testing.T, lam *awslambda.Client, name string) map[string]string {
	t.Helper()
	fn, err := lam.GetFunction(context.Background(), &awslambda.GetFunctionInput{FunctionName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return fn.Configuration.Environment.Variables
}
