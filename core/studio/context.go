package studio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// Steps of the context API in errors.
const (
	StepContextOpen   = "context open"
	StepContextSearch = "context search"
	StepContextAssign = "context.assign"
)

// Defaults of the context API (the reference's ContextClient).
const (
	DefaultContextMaxChars = 3000
	DefaultSearchLimit     = 5
)

// ContextCitation is a source an item cites.
type ContextCitation struct {
	Ref        string `json:"ref"`
	Title      string `json:"title"`
	SourceType string `json:"source_type"`
	Version    int    `json:"version"`
}

// ContextItem is an opened context item (ContextOpenResponse).
type ContextItem struct {
	Ref          string            `json:"ref"`
	Title        string            `json:"title"`
	Scope        string            `json:"scope"` // workspace or mission
	SourceType   string            `json:"source_type"`
	Version      int               `json:"version"`
	Instructions string            `json:"instructions"`
	Tags         []string          `json:"tags"`
	Content      string            `json:"content"`
	Citations    []ContextCitation `json:"citations"`
}

// ContextSearchResult is one search hit (ContextSearchResult).
type ContextSearchResult struct {
	Ref        string           `json:"ref"`
	Title      string           `json:"title"`
	Scope      string           `json:"scope"`
	SourceType string           `json:"source_type"`
	Version    int              `json:"version"`
	Tags       []string         `json:"tags"`
	Excerpt    string           `json:"excerpt"`
	Score      int              `json:"score"`
	Citation   *ContextCitation `json:"citation"`
}

// ContextSearchResponse is the answer of SearchContext.
type ContextSearchResponse struct {
	Query   string                `json:"query"`
	Results []ContextSearchResult `json:"results"`
}

// OpenContextRequest asks for one item. MaxChars 0 is DefaultContextMaxChars.
type OpenContextRequest struct {
	Ref       string
	MissionID string
	Query     string
	MaxChars  int
}

// SearchContextRequest searches the workspace's context. Limit 0 is DefaultSearchLimit.
type SearchContextRequest struct {
	Query     string
	MissionID string
	Scope     string // "", workspace or mission
	Tags      []string
	Limit     int
}

// OpenContext opens one context item: POST /w/{ws}/api/v1/context/open/.
func (c *Client) OpenContext(ctx context.Context, r OpenContextRequest) (*ContextItem, error) {
	if r.MaxChars == 0 {
		r.MaxChars = DefaultContextMaxChars
	}
	body := map[string]any{"ref": r.Ref, "max_chars": r.MaxChars}
	if r.MissionID != "" {
		body["mission_id"] = r.MissionID
	}
	if r.Query != "" {
		body["query"] = r.Query
	}
	k := call{step: StepContextOpen, method: http.MethodPost, url: c.workspaceURL("context/open/"), body: body,
		hints: map[int]string{http.StatusNotFound: fmt.Sprintf("Studio has no context item %q in this workspace", r.Ref)}}
	resp, err := c.do(ctx, k)
	if err != nil {
		return nil, err
	}
	var item ContextItem
	if err := decodeJSON(k, resp, &item); err != nil {
		return nil, err
	}
	if err := checkItem(resp.body); err != nil {
		return nil, k.fail(resp.status, err)
	}
	return &item, nil
}

// checkItem requires the members the reference model requires.
func checkItem(body []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return errors.New("the context item Studio returned is not an object")
	}
	var missing []string
	for _, k := range [...]string{"ref", "title", "scope", "source_type", "version", "content"} {
		if v, ok := m[k]; !ok || string(v) == "null" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the context item Studio returned lacks %s", strings.Join(missing, ", "))
	}
	return nil
}

// SearchContext searches the workspace's context: POST /w/{ws}/api/v1/context/search/.
func (c *Client) SearchContext(ctx context.Context, r SearchContextRequest) (*ContextSearchResponse, error) {
	if r.Limit == 0 {
		r.Limit = DefaultSearchLimit
	}
	body := map[string]any{"query": r.Query, "limit": r.Limit}
	if r.MissionID != "" {
		body["mission_id"] = r.MissionID
	}
	if r.Scope != "" {
		body["scope"] = r.Scope
	}
	if len(r.Tags) > 0 {
		body["tags"] = r.Tags
	}
	k := call{step: StepContextSearch, method: http.MethodPost, url: c.workspaceURL("context/search/"), body: body}
	resp, err := c.do(ctx, k)
	if err != nil {
		return nil, err
	}
	var out ContextSearchResponse
	if err := decodeJSON(k, resp, &out); err != nil {
		return nil, err
	}
	if out.Results == nil {
		out.Results = []ContextSearchResult{}
	}
	return &out, nil
}

// ContextOpener opens context items (a *Client, or a test double).
type ContextOpener interface {
	OpenContext(ctx context.Context, r OpenContextRequest) (*ContextItem, error)
}

var _ ContextOpener = (*Client)(nil)

// AssignedItem is one context item of a job with its provenance.
type AssignedItem struct {
	Ref        string    `json:"ref"`
	Version    int       `json:"version"`
	Scope      string    `json:"scope"`
	Title      string    `json:"title"`
	SourceType string    `json:"source_type"`
	Hash       string    `json:"hash"` // SHA-256 of Content, hex
	SyncedAt   time.Time `json:"synced_at"`
	Content    string    `json:"content"`
}

// AssignedContext is the context of one job, as context.assign left it.
type AssignedContext struct {
	WorkspaceID string         `json:"workspace_id"`
	AgentSlug   string         `json:"agent_slug"`
	JobID       string         `json:"job_id"`
	MissionID   *string        `json:"mission_id"`
	AssignedAt  string         `json:"assigned_at"`
	Items       []AssignedItem `json:"items"`
}

// ContextAssigner runs context.assign: it opens each assigned item once, requires the version
// Studio returns to be the assigned one, and stores the items with their provenance under the job
// (a new assignment replaces the previous one: it is the only refresh).
type ContextAssigner struct {
	Opener ContextOpener
	Store  store.Store
	// MaxChars bounds each item's content (DefaultContextMaxChars when 0).
	MaxChars int
	// Expiry, when not zero, makes the stored context expire that long after the assignment;
	// zero keeps it (store.Never).
	Expiry time.Duration
	Now    func() time.Time
}

// ContextKey is the store key of a job's context: per verified workspace, agent and job.
func ContextKey(workspaceID, agentSlug, jobID string) string {
	return "svz/context/" + workspaceID + "/" + agentSlug + "/" + jobID
}

// Assign runs the context.assign action req: it decodes the assignment, opens every item (each
// distinct ref once), and stores them only when every version matches. Any failure — an invalid
// assignment, a failed open, a version that differs — fails the whole assignment and stores
// nothing. req.WorkspaceAuthorization must be the verified context (the workspace the record is
// filed under).
func (a *ContextAssigner) Assign(ctx context.Context, req *contract.ActionRequest) (*AssignedContext, error) {
	if a.Opener == nil || a.Store == nil {
		return nil, errors.New("context.assign needs a Studio client and a store (SUPERVAIZE_API_KEY and SUPERVAIZER_STORE)")
	}
	if req.WorkspaceAuthorization == nil || req.WorkspaceAuthorization.WorkspaceID == "" {
		return nil, errors.New("context.assign needs the call's verified workspace")
	}
	asg, err := contract.DecodeContextAssignment(req.Input)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid assignment: %w", StepContextAssign, err)
	}
	if req.JobID != nil && *req.JobID != "" && *req.JobID != asg.JobID {
		return nil, fmt.Errorf("%s: the assignment is for job %q but the call names job %q", StepContextAssign, asg.JobID, *req.JobID)
	}
	if strings.TrimSpace(asg.JobID) == "" {
		return nil, fmt.Errorf("%s: the assignment has no job_id", StepContextAssign)
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	mission := ""
	if asg.MissionID != nil {
		mission = *asg.MissionID
	}
	opened := map[string]*ContextItem{}
	out := &AssignedContext{WorkspaceID: req.WorkspaceAuthorization.WorkspaceID, AgentSlug: req.AgentSlug, JobID: asg.JobID,
		MissionID: asg.MissionID, AssignedAt: asg.AssignedAt, Items: make([]AssignedItem, 0, len(asg.Items))}
	var mismatches []string
	for _, it := range asg.Items {
		got, ok := opened[it.Ref]
		if !ok {
			r := OpenContextRequest{Ref: it.Ref, MaxChars: a.MaxChars}
			if it.Scope == contract.ContextScopeMission {
				r.MissionID = mission
			}
			got, err = a.Opener.OpenContext(ctx, r)
			if err != nil {
				return nil, fmt.Errorf("%s: item %q: %w", StepContextAssign, it.Ref, err)
			}
			opened[it.Ref] = got
		}
		if got.Version != it.Version {
			mismatches = append(mismatches, fmt.Sprintf("%s (assigned version %d, Studio now has %d)", it.Ref, it.Version, got.Version))
			continue
		}
		sum := sha256.Sum256([]byte(got.Content))
		out.Items = append(out.Items, AssignedItem{Ref: it.Ref, Version: got.Version, Scope: it.Scope, Title: it.Title,
			SourceType: got.SourceType, Hash: hex.EncodeToString(sum[:]), SyncedAt: now().UTC(), Content: got.Content})
	}
	if len(mismatches) > 0 {
		return nil, fmt.Errorf("%s: context changed since it was assigned, nothing stored: %s; assign the context again",
			StepContextAssign, strings.Join(mismatches, "; "))
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%s: encode: %w", StepContextAssign, err)
	}
	exp := store.Never
	if a.Expiry > 0 {
		exp = now().Add(a.Expiry)
	}
	if err := put(ctx, a.Store, ContextKey(out.WorkspaceID, out.AgentSlug, out.JobID), b, exp); err != nil {
		return nil, fmt.Errorf("%s: store the context of job %q: %w", StepContextAssign, out.JobID, err)
	}
	return out, nil
}

// put creates or replaces the record under key.
func put(ctx context.Context, st store.Store, key string, value []byte, exp time.Time) error {
	for range 5 {
		rec, err := st.Create(ctx, key, value, exp)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrExists) {
			return err
		}
		_, err = st.Update(ctx, key, rec.Version, value, exp)
		if err == nil || (!errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound)) {
			return err
		}
	}
	return errors.New("the record keeps changing under concurrent writes")
}

// LoadAssignedContext returns the context context.assign stored for a job, or an error wrapping
// store.ErrNotFound.
func LoadAssignedContext(ctx context.Context, st store.Store, workspaceID, agentSlug, jobID string) (*AssignedContext, error) {
	rec, err := st.Get(ctx, ContextKey(workspaceID, agentSlug, jobID))
	if err != nil {
		return nil, fmt.Errorf("context of job %q: %w", jobID, err)
	}
	var out AssignedContext
	if err := json.Unmarshal(rec.Value, &out); err != nil {
		return nil, fmt.Errorf("context of job %q: stored record is not valid: %w", jobID, err)
	}
	return &out, nil
}
