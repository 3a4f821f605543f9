package studio_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/devstudio"
)

var contextItems = []devstudio.ContextItem{
	{Ref: "supervaize.context.workspace.brand", Title: "Brand voice", Scope: "workspace", SourceType: "document", Version: 3,
		Tags: []string{"brand"}, Content: "Write warmly. Never promise delivery dates."},
	{Ref: "supervaize.context.mission.january-brief", Title: "January brief", Scope: "mission", SourceType: "note", Version: 1,
		Content: "Focus on returning customers in January."},
}

func TestContextOpenAndSearch(t *testing.T) {
	s := standIn(t, devstudio.Config{Context: contextItems})
	c := newClient(t, s, nil, nil)
	item, err := c.OpenContext(context.Background(), studio.OpenContextRequest{Ref: "supervaize.context.workspace.brand", MaxChars: 12})
	if err != nil {
		t.Fatal(err)
	}
	if item.Version != 3 || item.Content != "Write warmly" || item.Title != "Brand voice" || item.Scope != "workspace" {
		t.Errorf("item %+v", item)
	}
	res, err := c.SearchContext(context.Background(), studio.SearchContextRequest{Query: "january customers"})
	if err != nil || len(res.Results) != 1 || res.Results[0].Ref != "supervaize.context.mission.january-brief" || res.Results[0].Citation == nil {
		t.Fatalf("search %+v %v", res, err)
	}
	_, err = c.OpenContext(context.Background(), studio.OpenContextRequest{Ref: "nope"})
	var se *studio.Error
	if !errors.As(err, &se) || se.Step != studio.StepContextOpen || se.Status != http.StatusNotFound || !strings.Contains(err.Error(), `Studio has no context item "nope"`) {
		t.Errorf("unknown ref: %v", err)
	}
}

// TestContextRequests checks the URLs and bodies of the context API against the reference.
func TestContextRequests(t *testing.T) {
	var bodies []string
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies, paths = append(bodies, string(b)), append(paths, r.URL.Path)
		if strings.HasSuffix(r.URL.Path, "/open/") {
			_, _ = w.Write([]byte(`{"ref":"r","title":"t","scope":"mission","source_type":"note","version":2,"content":"c"}`))
			return
		}
		_, _ = w.Write([]byte(`{"query":"q","results":[]}`))
	}))
	defer srv.Close()
	c, _ := studio.New(studio.Settings{APIURL: srv.URL, WorkspaceID: "w", APIKey: "k-123456", Timeout: time.Minute})
	if _, err := c.OpenContext(context.Background(), studio.OpenContextRequest{Ref: "r", MissionID: "m", Query: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SearchContext(context.Background(), studio.SearchContextRequest{Query: "q", Scope: "mission", Tags: []string{"a"}, MissionID: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SearchContext(context.Background(), studio.SearchContextRequest{Query: "q"}); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"max_chars":3000,"mission_id":"m","query":"q","ref":"r"}`, `{"limit":5,"mission_id":"m","query":"q","scope":"mission","tags":["a"]}`, `{"limit":5,"query":"q"}`}
	for i, w := range want {
		if bodies[i] != w {
			t.Errorf("body %d: %s, want %s", i, bodies[i], w)
		}
	}
	if paths[0] != "/w/w/api/v1/context/open/" || paths[1] != "/w/w/api/v1/context/search/" {
		t.Errorf("paths %v", paths)
	}
}

func assignRequest(t *testing.T, input string) *contract.ActionRequest {
	t.Helper()
	job := "job-7"
	return &contract.ActionRequest{RequestID: "r1", AgentSlug: "hello-world-ai-agent", Action: "context.assign", JobID: &job,
		Input: json.RawMessage(input), WorkspaceAuthorization: &contract.VerifiedWorkspaceContext{WorkspaceID: "ws-1", AgentSlug: "hello-world-ai-agent"}}
}

const assignment = `{"items":[
 {"ref":"supervaize.context.workspace.brand","version":3,"scope":"workspace","title":"Brand voice"},
 {"ref":"supervaize.context.mission.january-brief","version":1,"scope":"mission","title":"January brief"},
 {"ref":"supervaize.context.workspace.brand","version":3,"scope":"workspace","title":"Brand voice again"}],
 "mission_id":"m-1","job_id":"job-7","assigned_at":"2026-01-05T10:00:00Z"}`

func TestContextAssign(t *testing.T) {
	s := standIn(t, devstudio.Config{Context: contextItems})
	st := memory.New()
	defer st.Close()
	synced := time.Date(2026, 1, 5, 10, 0, 1, 0, time.UTC)
	opens := 0
	opener := openerFunc(func(ctx context.Context, r studio.OpenContextRequest) (*studio.ContextItem, error) {
		opens++
		return newClient(t, s, nil, nil).OpenContext(ctx, r)
	})
	a := &studio.ContextAssigner{Opener: opener, Store: st, Now: func() time.Time { return synced }}
	got, err := a.Assign(context.Background(), assignRequest(t, assignment))
	if err != nil {
		t.Fatal(err)
	}
	if opens != 2 {
		t.Errorf("%d opens, want one per distinct ref", opens)
	}
	sum := sha256.Sum256([]byte(contextItems[0].Content))
	if len(got.Items) != 3 || got.Items[0].Hash != hex.EncodeToString(sum[:]) || !got.Items[0].SyncedAt.Equal(synced) ||
		got.Items[1].Content != contextItems[1].Content || got.Items[1].Version != 1 || got.JobID != "job-7" {
		t.Fatalf("assigned %+v", got)
	}
	stored, err := studio.LoadAssignedContext(context.Background(), st, "ws-1", "hello-world-ai-agent", "job-7")
	if err != nil || len(stored.Items) != 3 || stored.Items[2].Title != "Brand voice again" || *stored.MissionID != "m-1" {
		t.Fatalf("stored %+v %v", stored, err)
	}

	// Studio's brief moves to version 2: the whole reassignment fails and the stored context stays.
	moved := append([]devstudio.ContextItem(nil), contextItems...)
	moved[1].Version = 2
	moved[1].Content = "Focus on new customers."
	s.SetContext(moved)
	_, err = a.Assign(context.Background(), assignRequest(t, strings.Replace(assignment, `"job_id":"job-7"`, `"job_id":"job-7"`, 1)))
	want := `context.assign: context changed since it was assigned, nothing stored: supervaize.context.mission.january-brief (assigned version 1, Studio now has 2); assign the context again`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	again, _ := studio.LoadAssignedContext(context.Background(), st, "ws-1", "hello-world-ai-agent", "job-7")
	if again.Items[1].Content != contextItems[1].Content {
		t.Error("a failed assignment changed the stored context")
	}
	// A first assignment that fails stores nothing at all.
	other := strings.ReplaceAll(assignment, "job-7", "job-8")
	req := assignRequest(t, other)
	j := "job-8"
	req.JobID = &j
	if _, err := a.Assign(context.Background(), req); err == nil {
		t.Fatal("mismatch accepted")
	}
	if _, err := studio.LoadAssignedContext(context.Background(), st, "ws-1", "hello-world-ai-agent", "job-8"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("something was stored: %v", err)
	}
	// An item Studio no longer has fails the assignment too.
	s.SetContext(contextItems[:1])
	if _, err := a.Assign(context.Background(), assignRequest(t, assignment)); err == nil || !strings.Contains(err.Error(), `item "supervaize.context.mission.january-brief": studio: context open`) {
		t.Fatalf("missing item: %v", err)
	}
	// The new version, assigned again, replaces the stored context.
	s.SetContext(moved)
	if _, err := a.Assign(context.Background(), assignRequest(t, strings.Replace(assignment, `"version":1`, `"version":2`, 1))); err != nil {
		t.Fatal(err)
	}
	again, _ = studio.LoadAssignedContext(context.Background(), st, "ws-1", "hello-world-ai-agent", "job-7")
	if again.Items[1].Content != "Focus on new customers." || again.Items[1].Version != 2 {
		t.Errorf("replaced %+v", again.Items[1])
	}
}

func TestContextAssignRefusals(t *testing.T) {
	st := memory.New()
	defer st.Close()
	a := &studio.ContextAssigner{Opener: openerFunc(func(context.Context, studio.OpenContextRequest) (*studio.ContextItem, error) {
		t.Fatal("opened")
		return nil, nil
	}), Store: st}
	unverified := assignRequest(t, assignment)
	unverified.WorkspaceAuthorization = nil
	otherJob := assignRequest(t, assignment)
	j := "job-9"
	otherJob.JobID = &j
	for name, tc := range map[string]struct {
		req  *contract.ActionRequest
		want string
	}{
		"unverified":    {unverified, "needs the call's verified workspace"},
		"other job":     {otherJob, `the assignment is for job "job-7" but the call names job "job-9"`},
		"invalid":       {assignRequest(t, `{"items":[{"ref":"r","version":"x","scope":"team","title":"t"}],"job_id":"j","assigned_at":"now"}`), "context.assign: invalid assignment"},
		"no mission id": {assignRequest(t, `{"items":[{"ref":"r","version":1,"scope":"mission","title":"t"}],"job_id":"job-7","assigned_at":"now"}`), "mission_id is required"},
	} {
		if _, err := a.Assign(context.Background(), tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

type openerFunc func(context.Context, studio.OpenContextRequest) (*studio.ContextItem, error)

func (f openerFunc) OpenContext(ctx context.Context, r studio.OpenContextRequest) (*studio.ContextItem, error) {
	return f(ctx, r)
}
