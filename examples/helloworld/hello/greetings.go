package hello

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// Greeting is an item of the greetings DataResource: a short text the operator keeps, per
// workspace, optionally tagged with the mission it was written in.
type Greeting struct {
	ID        string `json:"id"`
	Text      string `json:"text"`
	MissionID string `json:"mission_id,omitempty"`
}

// Bounds of a greeting.
const (
	greetingMaxRunes = 280
	greetingMaxID    = 64
)

// GreetingsResource is Hello World's DataResource: greetings kept in the controller's store, one
// namespace per verified workspace, so one workspace never sees another's. A greeting created in a
// mission records its id; a listing that carries the mission's metadata shows only that mission's
// greetings (a narrowing, not an access boundary: the mission headers are unsigned).
func GreetingsResource() core.DataResource[Greeting] {
	return core.DataResource[Greeting]{
		Name:        "greetings",
		Description: "Greetings kept by the Hello World agent, per workspace.",
		Fields: []contract.DataResourceField{
			{Name: "id", Editable: contract.EditableCreateOnly, Description: "Lowercase letters, digits, _ and -; generated when empty"},
			{Name: "text", FieldType: contract.DataFieldText, Required: true, Description: "At most 280 characters"},
			{Name: "mission_id", Label: "Mission", Editable: contract.EditableNever, VisibleOn: []string{"list", "detail"}},
		},
		ListPage: listGreetings,
		Get: func(ctx context.Context, dc *core.DataContext, id string) (Greeting, error) {
			g, _, err := loadGreeting(ctx, dc, id)
			return g, err
		},
		Create: func(ctx context.Context, dc *core.DataContext, g Greeting) (Greeting, error) {
			g, err := newGreeting(dc, g)
			if err != nil {
				return Greeting{}, err
			}
			return g, createGreeting(ctx, dc, g)
		},
		Update: updateGreeting,
		Delete: deleteGreeting,
		Import: importGreetings,
	}
}

// greetingKey is the store key of a greeting: agent, resource, verified workspace, id.
func greetingKey(dc *core.DataContext, id string) string {
	return greetingPrefix(dc) + id
}

func greetingPrefix(dc *core.DataContext) string {
	return Slug + "/greetings/" + url.PathEscape(dc.WorkspaceID) + "/"
}

func greetingStore(dc *core.DataContext) (store.Store, error) {
	if dc.Store == nil {
		return nil, errors.New("greetings: the controller has no store (set SUPERVAIZER_STORE)")
	}
	return dc.Store, nil
}

// newGreeting checks a greeting sent by Studio and completes it: a generated id when it has none,
// the mission it is written in.
func newGreeting(dc *core.DataContext, g Greeting) (Greeting, error) {
	if g.ID == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return Greeting{}, err
		}
		g.ID = "greeting-" + hex.EncodeToString(b[:])
	}
	if !contract.ValidDataResourceName(g.ID) || len(g.ID) > greetingMaxID {
		return Greeting{}, invalid(fmt.Sprintf("id must be 1 to %d lowercase letters, digits, _ or -, starting with a letter or digit", greetingMaxID))
	}
	if err := checkText(g.Text); err != nil {
		return Greeting{}, err
	}
	g.MissionID = dc.MissionID
	return g, nil
}

func checkText(text string) error {
	if strings.TrimSpace(text) == "" {
		return invalid(`text is required: send {"text": "Hello!"}`)
	}
	if utf8.RuneCountInString(text) > greetingMaxRunes {
		return invalid(fmt.Sprintf("text is longer than %d characters", greetingMaxRunes))
	}
	return nil
}

func invalid(detail string) error {
	return &core.DataError{Status: http.StatusUnprocessableEntity, Detail: detail}
}

func createGreeting(ctx context.Context, dc *core.DataContext, g Greeting) error {
	s, err := greetingStore(dc)
	if err != nil {
		return err
	}
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if _, err := s.Create(ctx, greetingKey(dc, g.ID), b, store.Never); err != nil {
		if errors.Is(err, store.ErrExists) {
			return &core.DataError{Status: http.StatusConflict, Detail: fmt.Sprintf("greeting '%s' already exists: update it instead", g.ID)}
		}
		return fmt.Errorf("greetings: create %q: %w", g.ID, err)
	}
	return nil
}

// loadGreeting returns a greeting and its store version, or core.ErrDataNotFound.
func loadGreeting(ctx context.Context, dc *core.DataContext, id string) (Greeting, uint64, error) {
	s, err := greetingStore(dc)
	if err != nil {
		return Greeting{}, 0, err
	}
	if !contract.ValidDataResourceName(id) || len(id) > greetingMaxID {
		return Greeting{}, 0, core.ErrDataNotFound // such an id is never stored
	}
	rec, err := s.Get(ctx, greetingKey(dc, id))
	if errors.Is(err, store.ErrNotFound) {
		return Greeting{}, 0, core.ErrDataNotFound
	}
	if err != nil {
		return Greeting{}, 0, fmt.Errorf("greetings: get %q: %w", id, err)
	}
	var g Greeting
	if err := json.Unmarshal(rec.Value, &g); err != nil {
		return Greeting{}, 0, fmt.Errorf("greetings: stored %q: %w", id, err)
	}
	return g, rec.Version, nil
}

// casRetries bounds the read-modify-write retries of a greeting written concurrently.
const casRetries = 3

func updateGreeting(ctx context.Context, dc *core.DataContext, id string, in Greeting) (Greeting, error) {
	if err := checkText(in.Text); err != nil {
		return Greeting{}, err
	}
	s, err := greetingStore(dc)
	if err != nil {
		return Greeting{}, err
	}
	for range casRetries {
		g, version, err := loadGreeting(ctx, dc, id)
		if err != nil {
			return Greeting{}, err
		}
		g.Text = in.Text
		b, err := json.Marshal(g)
		if err != nil {
			return Greeting{}, err
		}
		_, err = s.Update(ctx, greetingKey(dc, id), version, b, store.Never)
		switch {
		case err == nil:
			return g, nil
		case errors.Is(err, store.ErrNotFound):
			return Greeting{}, core.ErrDataNotFound
		case !errors.Is(err, store.ErrConflict):
			return Greeting{}, fmt.Errorf("greetings: update %q: %w", id, err)
		}
	}
	return Greeting{}, &core.DataError{Status: http.StatusConflict, Detail: fmt.Sprintf("greeting '%s' is being changed by another call: retry", id)}
}

func deleteGreeting(ctx context.Context, dc *core.DataContext, id string) error {
	s, err := greetingStore(dc)
	if err != nil {
		return err
	}
	for range casRetries {
		_, version, err := loadGreeting(ctx, dc, id)
		if err != nil {
			return err
		}
		err = s.Delete(ctx, greetingKey(dc, id), version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("greetings: delete %q: %w", id, err)
		}
	}
	return &core.DataError{Status: http.StatusConflict, Detail: fmt.Sprintf("greeting '%s' is being changed by another call: retry", id)}
}

// listGreetings reads the workspace's greetings in id order, one store page at a time, so a large
// collection is never loaded whole.
func listGreetings(ctx context.Context, dc *core.DataContext, page core.DataPage) ([]Greeting, error) {
	s, err := greetingStore(dc)
	if err != nil {
		return nil, err
	}
	lister, ok := s.(store.Lister)
	if !ok {
		return nil, fmt.Errorf("greetings: the store %T cannot list records (store.Lister)", s)
	}
	out := make([]Greeting, 0, min(page.Limit, store.MaxListLimit))
	skip := page.Skip
	after := ""
	for {
		p, err := lister.List(ctx, greetingPrefix(dc), after, store.MaxListLimit)
		if err != nil {
			return nil, fmt.Errorf("greetings: list: %w", err)
		}
		for _, it := range p.Items {
			var g Greeting
			if err := json.Unmarshal(it.Value, &g); err != nil {
				return nil, fmt.Errorf("greetings: stored %q: %w", it.Key, err)
			}
			if dc.Mission != nil && g.MissionID != dc.Mission.ID {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			if out = append(out, g); len(out) == page.Limit {
				return out, nil
			}
		}
		if p.Next == "" {
			return out, nil
		}
		after = p.Next
	}
}

// importGreetings creates every greeting of a batch that does not exist yet.
func importGreetings(ctx context.Context, dc *core.DataContext, in []Greeting) (any, error) {
	valid := make([]Greeting, 0, len(in))
	for i, g := range in {
		g, err := newGreeting(dc, g)
		if err != nil {
			if de, ok := errors.AsType[*core.DataError](err); ok {
				return nil, &core.DataError{Status: de.Status, Detail: fmt.Sprintf("record %d: %s", i, de.Detail)}
			}
			return nil, err
		}
		valid = append(valid, g)
	}
	created, skipped := 0, []string{}
	for _, g := range valid {
		err := createGreeting(ctx, dc, g)
		if de, ok := errors.AsType[*core.DataError](err); ok && de.Status == http.StatusConflict {
			skipped = append(skipped, g.ID)
			continue
		}
		if err != nil {
			return nil, err
		}
		created++
	}
	return map[string]any{"created": created, "skipped": skipped}, nil
}
