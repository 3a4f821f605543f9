package leads_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/postgres"
	"github.com/supervaize/svz/core/svztest"
	"github.com/supervaize/svz/examples/leadgen/leads"
	"github.com/supervaize/svz/internal/testenv"
)

// The agent's whole life through the real controller, on the memory store and, when
// scripts/with-services runs the tests (always in CI), on PostgreSQL and on DynamoDB (moto).

func TestOnMemory(t *testing.T) { run(t, nil) }

func TestOnPostgres(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	table := testenv.UniqueName("leadgen_test_")
	s, err := postgres.New(context.Background(), pool, postgres.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		if p, err := pgxpool.New(context.Background(), url); err == nil {
			_, _ = p.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
			p.Close()
		}
	})
	run(t, s)
}

func TestOnDynamoDB(t *testing.T) {
	c, table := dynamodbtest.Table(t, testenv.Need(t, testenv.AWSEndpoint), "leadgen-test-")
	run(t, dynamodbtest.Open(t, c, table))
}

func errorsOf(res *svztest.Result) string {
	var parts []string
	for _, e := range res.Errors {
		at := e.Field
		if e.Item != nil {
			at += "[" + string(rune('0'+*e.Item)) + "]." + e.ItemField
		}
		parts = append(parts, e.Code+" "+at+": "+e.Message)
	}
	return strings.Join(parts, "; ")
}

var setup = map[string]any{"industry": "saas", "region": "Western Europe", "leads": "3", "require_review": "true", "reviewer_email": "ann@example.com"}

func run(t *testing.T, s store.Store) {
	a, err := leads.NewAgent(leads.Delays{})
	if err != nil {
		t.Fatal(err)
	}
	var opts []svztest.Option
	if s != nil {
		opts = append(opts, svztest.WithStore(s))
	}
	h := svztest.New(t, a, opts...)
	_, lists := h.Store().(store.Lister)

	t.Run("every declared action and surface answers", func(t *testing.T) {
		inputs := map[string]any{}
		if !lists { // until every backend lists (store.Lister), listing answers -32603 there
			inputs["resource.contacts.list"], inputs["dataset.lead_runs.query"] = svztest.Skip, svztest.Skip
		}
		h.CheckHandlers(t, inputs, svztest.JobID("no-such-job"))
	})

	t.Run("the form is the setup plan", func(t *testing.T) {
		form := h.Load(t, contract.SurfaceJobStart, nil, svztest.DraftSessionID("draft-1"))
		fields := svztest.As[[]contract.FieldDefinition](t, form.Doc["fields"])
		if form.Doc["type"] != "Form" || len(fields) != 7 || fields[4].DependsOn.Field != "mode" || *form.A2UICatalogVersion != "leadgen.2026-12-01" {
			t.Errorf("job.start form = %s", form.JSON)
		}
	})

	t.Run("help action drafts the region", func(t *testing.T) {
		res := h.Invoke(t, leads.SuggestRegion, map[string]any{"field": "region", "values": map[string]any{"industry": "retail"}})
		if res.Draft == nil || res.Draft.Value != "Western Europe" {
			t.Errorf("draft = %s", res.JSON)
		}
	})

	t.Run("preview checks the draft and estimates the cost", func(t *testing.T) {
		res := h.Invoke(t, contract.JobStartPreviewAction, map[string]any{"industry": "saas", "leads": "20", "mode": "thorough"})
		plan := res.SetupPlan
		if plan == nil || plan.Steps[0].Status != contract.SetupAwaiting || plan.Steps[1].Status != contract.SetupDone ||
			*plan.CostEstimate.Min != 60 || *plan.CostEstimate.Max != 90 || plan.CostEstimate.Unit != "credits" {
			t.Errorf("preview = %s", res.JSON)
		}
		res = h.Invoke(t, contract.JobStartPreviewAction, map[string]any{"leads": 0})
		if got := errorsOf(res); got != "input_min leads: Input should be greater than or equal to 1" {
			t.Errorf("invalid draft = %s", got)
		}
	})

	t.Run("dry run costs but keeps nothing", func(t *testing.T) {
		res := h.Invoke(t, leads.TestRun, setup, svztest.JobID("dry-1"))
		sample := svztest.As[[]leads.Lead](t, res.Effects[0].Items)
		if res.DryRun == nil || *res.DryRun.CostIncurred.Max != 3 || len(sample) != 3 || sample[0].Company != "saas-western-europe-001" {
			t.Errorf("dry run = %s", res.JSON)
		}
		if _, err := state.Of[leads.Job](h.Context(), "jobs").Get(h.Context(), "dry-1"); !strings.Contains(err.Error(), "not found") {
			t.Errorf("the dry run left a job: %v", err)
		}
	})

	t.Run("an invalid start does not consume the key", func(t *testing.T) {
		bad := map[string]any{"industry": "saas", "leads": "x", "mode": "thorough", "budget": -5}
		res := h.Invoke(t, contract.JobStartAction, bad, svztest.JobID("job-1"), svztest.IdempotencyKey("start-1"))
		want := "input_required region: Field required; " +
			"input_type leads: Input should be a valid integer, unable to parse string as an integer; " +
			"input_min budget: Budget cannot be negative"
		if res.Status != contract.StatusError || errorsOf(res) != want {
			t.Errorf("invalid start = %s\nwant %s", errorsOf(res), want)
		}
	})

	t.Run("start runs once per key, in the background, two cases in two lanes", func(t *testing.T) {
		res := h.AssertConfirmIdempotent(t, contract.JobStartAction, setup, svztest.JobID("job-1"), svztest.IdempotencyKey("start-1"))
		if res.JobState == nil || res.JobState.Job.Status != contract.StateActive || res.Effects[0].Type != contract.EffectJobStarted {
			t.Fatalf("job.start = %+v", res)
		}
		js := h.WaitJob(t, "job-1", contract.StateAwaiting).JobState
		var steps []string
		for _, c := range js.Cases {
			for _, st := range c.Steps {
				steps = append(steps, c.Lane+"/"+c.ID+"/"+st.ID+"="+st.Status)
			}
		}
		want := "work/job-1-research/job-1-find=completed work/job-1-research/job-1-score=completed " +
			"deliverable/job-1-report/job-1-report=completed deliverable/job-1-report/job-1-review=awaiting"
		if got := strings.Join(steps, " "); got != want || js.Cases[0].Metadata["progress"] == nil {
			t.Fatalf("steps = %s\nwant %s\n%+v", got, want, js)
		}
		step := js.Cases[1].Steps[1]
		if step.Awaiting == nil || step.Awaiting.Action != contract.StepAwaitingSubmitAction || len(step.Awaiting.Fields) != 3 {
			t.Errorf("review step = %+v", step)
		}
		var started int
		for _, ev := range h.Effects(t) {
			if ev.Action == contract.JobStartAction && len(ev.Effects) > 0 && ev.Effects[0].Type == contract.EffectJobStarted {
				started++
			}
		}
		if started != 1 {
			t.Errorf("job.started published %d times, want once", started)
		}
	})

	t.Run("the review surface shows the report", func(t *testing.T) {
		doc := h.Load(t, contract.SurfaceStepAwaiting, nil, svztest.JobID("job-1")).Doc
		inner, _ := doc["document"].(map[string]any)
		if doc["type"] != "DocumentReview" || !strings.Contains(inner["value"].(string), "| saas-western-europe-003 |") {
			t.Errorf("review document = %v", doc)
		}
		missing := h.Load(t, contract.SurfaceStepAwaiting, nil, svztest.JobID("job-404"))
		if len(missing.Errors) != 1 || missing.Errors[0].Code != "job_not_found" {
			t.Errorf("review of a missing job = %s", missing.JSON)
		}
	})

	t.Run("another workspace cannot see the job", func(t *testing.T) {
		res := h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("job-1"), svztest.Workspace("workspace-2"))
		if res.Status != contract.StatusError || res.Errors[0].Code != "job_not_found" {
			t.Errorf("job.sync from another workspace = %s", res.JSON)
		}
	})

	t.Run("the review answer is checked, then imports the leads", func(t *testing.T) {
		review := svztest.StepID("job-1-review") // the awaiting step Studio answers
		res := h.Invoke(t, contract.StepAwaitingSubmitAction, map[string]any{"report": "# edited"}, svztest.JobID("job-1"), review)
		if got := errorsOf(res); got != "input_required approved: Field required" {
			t.Errorf("incomplete review = %s", got)
		}
		res = h.Invoke(t, contract.StepAwaitingSubmitAction, map[string]any{"report": "# edited", "approved": "yes"}, svztest.JobID("job-1"), review)
		if res.Status != contract.StatusOK || res.JobState.Job.Status != contract.StateActive || res.Effects[0].StepID != "job-1-review" {
			t.Errorf("review = %s", res.JSON)
		}
		res = h.WaitJob(t, "job-1", contract.StateCompleted)
		if steps := res.JobState.Cases[1].Steps; len(steps) != 4 || len(steps[1].Outputs) != 1 || steps[2].ID != "job-1-decide" || steps[3].ID != "job-1-import" {
			t.Errorf("job.sync = %s", res.JSON)
		}
		c, err := state.Of[leads.Contact](h.Context(), leads.Contacts).Get(h.Context(), "contact@saas-western-europe-002.example")
		if err != nil || c.JobID != "job-1" {
			t.Errorf("imported contact = %+v, %v", c, err)
		}
		again := h.Invoke(t, contract.StepAwaitingSubmitAction, map[string]any{"report": "x", "approved": false}, svztest.JobID("job-1"), review)
		if len(again.Errors) != 1 || again.Errors[0].Code != "step_not_awaiting" {
			t.Errorf("second review = %s", again.JSON)
		}
	})

	t.Run("job.sync converges on the stored state", func(t *testing.T) {
		first := h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("job-1"))
		second := h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("job-1"))
		if string(first.JSON) != string(second.JSON) || first.JobState.Job.Status != contract.StateCompleted {
			t.Errorf("sync = %s\nthen %s", first.JSON, second.JSON)
		}
		if info := first.JobState.Job.Information; info == nil || info.Cost == nil || info.Cost.TotalCost != 3 || info.Cost.Currency != "credits" {
			t.Errorf("information = %+v", info)
		}
	})

	t.Run("report artifact and detail view", func(t *testing.T) {
		res := h.Invoke(t, contract.ArtifactGetAction, map[string]any{"artifact_id": "report:job-1"})
		if res.Effects[0].Data["content"] != "# edited" {
			t.Errorf("artifact = %s", res.JSON)
		}
		if res = h.Invoke(t, contract.ArtifactGetAction, map[string]any{"artifact_id": "report:job-404"}); errorsOf(res) != `artifact_not_found artifact_id: No artifact "report:job-404" in this workspace` {
			t.Errorf("missing artifact = %s", res.JSON)
		}
		detail := h.Load(t, contract.SurfaceStepDetail, nil, svztest.JobID("job-1")).Doc
		if detail["type"] != "Detail" || detail["summary"] != "3 saas leads in Western Europe" {
			t.Errorf("detail = %v", detail)
		}
	})

	t.Run("contacts resource", func(t *testing.T) {
		res := h.Invoke(t, "resource.contacts.create", map[string]any{"email": "not an email", "score": 101})
		if got := errorsOf(res); got != `input_pattern email: String should match pattern '^[^@\s]+@[^@\s]+$'; input_max score: Input should be less than or equal to 100` {
			t.Errorf("invalid contact = %s", got)
		}
		res = h.Invoke(t, "resource.contacts.create", map[string]any{"email": "bob@acme.example", "name": "Bob", "score": "7", "job_id": "forged"})
		if c := svztest.As[leads.Contact](t, res.Effects[0].Item); c.Score != 7 || c.JobID != "" {
			t.Errorf("created = %s (job_id is read-only)", res.JSON)
		}
		if res = h.Invoke(t, "resource.contacts.create", map[string]any{"email": "bob@acme.example"}); errorsOf(res) != `input_invalid email: Contacts already has a record "bob@acme.example"` {
			t.Errorf("duplicate = %s", errorsOf(res))
		}
		res = h.Invoke(t, "resource.contacts.update", map[string]any{"email": "bob@acme.example", "company": "Acme"})
		if c := svztest.As[leads.Contact](t, res.Effects[0].Item); c.Company != "Acme" || c.Name != "Bob" {
			t.Errorf("updated = %s", res.JSON)
		}
		if res = h.Invoke(t, "resource.contacts.get", map[string]any{"id": "bob@acme.example"}); res.Effects[0].Item.(map[string]any)["score"] != 7.0 {
			t.Errorf("get = %s", res.JSON)
		}
		// One contact per address, whatever its case: the email is lower-cased before it keys the record.
		res = h.Invoke(t, "resource.contacts.create", map[string]any{"email": "Carol@Example.COM", "name": "Carol"})
		if c := svztest.As[leads.Contact](t, res.Effects[0].Item); c.Email != "carol@example.com" {
			t.Errorf("created = %s (the email lower-cased)", res.JSON)
		}
		if res = h.Invoke(t, "resource.contacts.create", map[string]any{"email": "CAROL@example.com"}); errorsOf(res) != `input_invalid email: Contacts already has a record "carol@example.com"` {
			t.Errorf("duplicate in another case = %s", res.JSON)
		}
		if !lists {
			t.Logf("%T cannot list yet: listing checks skipped", h.Store())
			return
		}
		var all []leads.Contact
		after := ""
		for {
			res = h.Invoke(t, "resource.contacts.list", map[string]any{"limit": 2, "after": after})
			all = append(all, svztest.As[[]leads.Contact](t, res.Effects[0].Items)...)
			next, _ := res.Effects[0].Data["next"].(string)
			if next == "" {
				break
			}
			after = next
		}
		if len(all) != 5 || all[0].Email != "bob@acme.example" || all[1].Email != "carol@example.com" {
			t.Errorf("listed = %+v", all)
		}
		// search looks in the declared search fields (email, name, company), in any case; count is every page's.
		for _, tc := range []struct {
			search, page string
			count        int
		}{
			{"ACME", "bob@acme.example", 1},
			{"western", "contact@saas-western-europe-001.example contact@saas-western-europe-002.example", 3},
			{"Contact 3", "contact@saas-western-europe-003.example", 1},
			{"nobody", "", 0},
		} {
			res = h.Invoke(t, "resource.contacts.list", map[string]any{"search": tc.search, "limit": 2})
			var page []string
			for _, c := range svztest.As[[]leads.Contact](t, res.Effects[0].Items) {
				page = append(page, c.Email)
			}
			if strings.Join(page, " ") != tc.page || *res.Effects[0].Count != tc.count {
				t.Errorf("search %q = %s", tc.search, res.JSON)
			}
		}
		h.Invoke(t, "resource.contacts.delete", map[string]any{"id": "bob@acme.example"})
		if res = h.Invoke(t, "resource.contacts.list", nil); *res.Effects[0].Count != 4 {
			t.Errorf("after delete = %s", res.JSON)
		}
	})

	t.Run("dataset and stop", func(t *testing.T) {
		h.Invoke(t, contract.JobStartAction, setup, svztest.JobID("job-2"))
		h.WaitJob(t, "job-2", contract.StateAwaiting)
		if res := h.Invoke(t, contract.JobStopAction, nil, svztest.JobID("job-2")); res.JobState.Job.Status != contract.StateCancelled {
			t.Errorf("stop = %s", res.JSON)
		}
		if !lists {
			return
		}
		res := h.Invoke(t, "dataset.lead_runs.query", nil)
		rows := svztest.As[[]map[string]any](t, res.Effects[0].Rows)
		if len(rows) != 2 || rows[0]["status"] != "completed" || rows[1]["status"] != "cancelled" || rows[1]["credits"] != 3.0 {
			t.Errorf("rows = %v", rows)
		}
	})
}

// A slow search (LEADGEN_FIND_DELAY) runs in the background: job.stop cancels its running step.
func TestSlowSearchStops(t *testing.T) {
	a, err := leads.NewAgent(leads.Delays{Find: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := svztest.New(t, a)
	if res := h.Invoke(t, contract.JobStartAction, setup, svztest.JobID("slow-1")); res.JobState.Job.Status != contract.StateActive {
		t.Fatalf("job.start = %s", res.JSON)
	}
	// The find step shows running at the delivery's first lease renewal (a third of the lease).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res := h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("slow-1"))
		if c := res.JobState.Cases; len(c) > 0 && len(c[0].Steps) == 1 && c[0].Steps[0].Status == contract.StateActive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the find step does not show running: %s", res.JSON)
		}
	}
	h.Invoke(t, contract.JobStopAction, nil, svztest.JobID("slow-1"))
	res := h.WaitJob(t, "slow-1", contract.StateCancelled)
	if c := res.JobState.Cases[0]; c.ID != "slow-1-research" || len(c.Steps) != 1 || c.Steps[0].Status != contract.StateCancelled {
		t.Errorf("job.sync = %s", res.JSON)
	}
}
