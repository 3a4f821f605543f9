package core_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/svztest"
)

type contact struct {
	ID        string `json:"id"`
	Email     string `json:"email"`
	Name      string `json:"name"`
	Company   string `json:"company,omitempty"`
	Source    string `json:"source,omitempty"`
	CreatedAt string `json:"created_at,omitempty"`
	CreatedBy string `json:"created_by,omitempty"`
	UpdatedBy string `json:"updated_by,omitempty"`
}

func contactsAgent(t *testing.T) *core.Agent {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "crm", DisplayName: "CRM", A2UICatalogVersion: "crm.1",
		Resources: []contract.ResourceDefinition{{ID: "contacts", Label: "Contacts",
			Operations: []string{"list", "get", "create", "update", "delete"},
			Display:    &contract.ResourceDisplay{TitleField: "name", SearchFields: []string{"name", "email"}},
			Fields: []contract.ResourceFieldDefinition{{ID: "email", Label: "Email", Required: true}, {ID: "name", Label: "Name"},
				{ID: "company", Label: "Company"}, {ID: "source", Label: "Source", ReadOnly: true}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "CRM", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// contactKey is the agent's id of a contact: "c-" and a hash of its email.
func contactKey(c contact) string {
	sum := sha256.Sum256([]byte(c.Email))
	return "c-" + hex.EncodeToString(sum[:4])
}

func TestServeResourceOptions(t *testing.T) {
	a := contactsAgent(t)
	core.ServeResource[contact](a, "contacts", "id",
		core.WithKey("email", contactKey), // the id derives from the email
		core.BeforeCreate(func(_ context.Context, req *contract.ActionRequest, c *contact) error {
			c.Email = strings.ToLower(strings.TrimSpace(c.Email))
			if strings.HasSuffix(c.Email, "@blocked.example") {
				return contract.InputErrors{contract.InvalidField("email", "This domain is blocked")}
			}
			c.Source, c.CreatedAt, c.CreatedBy = "import", "2026-12-01", req.Actor.UserID // the hooks get the request
			return nil
		}),
		core.BeforeUpdate(func(_ context.Context, req *contract.ActionRequest, c *contact) error {
			c.UpdatedBy = req.Actor.UserID + " via " + req.Action
			return nil
		}),
		// The agent serves delete itself: no "two handlers" error at New.
		core.WithOperation("delete", core.ActionFunc(func(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
			return contract.Refuse(contract.InvalidField("id", "contacts are archived, never deleted")), nil
		})),
	)
	h := svztest.New(t, a)

	res := h.Invoke(t, "resource.contacts.create", map[string]any{"email": " Ann@Example.COM ", "name": "Ann", "source": "spoofed"})
	ann := svztest.As[contact](t, res.Effects[0].Item)
	if want := (contact{ID: contactKey(contact{Email: "ann@example.com"}), Email: "ann@example.com", Name: "Ann", Source: "import", CreatedAt: "2026-12-01",
		CreatedBy: "svztest-user"}); ann != want {
		t.Errorf("created %+v\nwant    %+v", ann, want)
	}
	// The same email again: the same id, refused naming the email, the field the key derives
	// from (the operator never typed the id).
	res = h.Invoke(t, "resource.contacts.create", map[string]any{"email": "ANN@example.com", "name": "Ann B"})
	if b, _ := json.Marshal(res.Errors); !res.Refusal() || string(b) != `[{"code":"input_invalid","message":"Contacts already has a record with email \"ann@example.com\"","field":"email"}]` {
		t.Errorf("second create = %s", res.JSON)
	}
	res = h.Invoke(t, "resource.contacts.create", map[string]any{"email": "x@blocked.example"})
	if b, _ := json.Marshal(res.Errors); !res.Refusal() || string(b) != `[{"code":"input_invalid","message":"This domain is blocked","field":"email"}]` {
		t.Errorf("hook refusal = %s", res.JSON)
	}

	res = h.Invoke(t, "resource.contacts.update", map[string]any{"id": ann.ID, "company": "Acme"})
	upd := svztest.As[contact](t, res.Effects[0].Item)
	if upd.Company != "Acme" || upd.UpdatedBy != "svztest-user via resource.contacts.update" || upd.ID != ann.ID || upd.Source != "import" {
		t.Errorf("updated %+v", upd)
	}
	if res := h.Invoke(t, "resource.contacts.delete", map[string]any{"id": ann.ID}); !res.Refusal() || !strings.Contains(string(res.JSON), "archived") {
		t.Errorf("own delete = %s", res.JSON)
	}
}

func TestServeResourceListSearchesAndCounts(t *testing.T) {
	a := contactsAgent(t)
	core.ServeResource[contact](a, "contacts", "email")
	h := svztest.New(t, a)
	for _, c := range []contact{{Email: "a@x.io", Name: "Ann Lee"}, {Email: "b@x.io", Name: "Bob"}, {Email: "c@y.io", Name: "Cleo", Company: "Ann Corp"},
		{Email: "d@x.io", Name: "Dan"}, {Email: "e@annex.io", Name: "Eve"}} {
		if res := h.Invoke(t, "resource.contacts.create", c); res.Status != contract.StatusOK {
			t.Fatalf("create %s", res.JSON)
		}
	}
	// Keyed by a field the operator types: a taken key is refused naming it.
	res := h.Invoke(t, "resource.contacts.create", contact{Email: "a@x.io"})
	if b, _ := json.Marshal(res.Errors); !res.Refusal() || string(b) != `[{"code":"input_invalid","message":"Contacts already has a record \"a@x.io\"","field":"email"}]` {
		t.Errorf("duplicate = %s", res.JSON)
	}
	type page struct {
		emails []string
		count  int
		next   any
	}
	list := func(in map[string]any) page {
		res := h.Invoke(t, "resource.contacts.list", in)
		if res.Status != contract.StatusOK {
			t.Fatalf("list %v = %s", in, res.JSON)
		}
		e := res.Effects[0]
		var p page
		for _, c := range svztest.As[[]contact](t, e.Items) {
			p.emails = append(p.emails, c.Email)
		}
		p.count = *e.Count
		if e.Data != nil {
			p.next = e.Data["next"]
		}
		return p
	}
	for _, tc := range []struct {
		in   map[string]any
		want string
	}{
		{nil, "[a@x.io b@x.io c@y.io d@x.io e@annex.io] 5 <nil>"},
		{map[string]any{"limit": 2}, "[a@x.io b@x.io] 5 b@x.io"},
		{map[string]any{"limit": 2, "after": "b@x.io"}, "[c@y.io d@x.io] 5 d@x.io"},
		{map[string]any{"limit": 2, "after": "d@x.io"}, "[e@annex.io] 5 <nil>"},
		// search: name and email (the declared search fields), any case; company is not one.
		{map[string]any{"search": "ANN"}, "[a@x.io e@annex.io] 2 <nil>"},
		{map[string]any{"search": "ann", "limit": 1}, "[a@x.io] 2 a@x.io"},
		{map[string]any{"search": "x.io", "prefix": "d"}, "[d@x.io] 1 <nil>"},
		{map[string]any{"search": "nobody"}, "[] 0 <nil>"},
	} {
		p := list(tc.in)
		if got := fmt.Sprintf("%v %d %v", p.emails, p.count, p.next); got != tc.want {
			t.Errorf("list %v = %q, want %q", tc.in, got, tc.want)
		}
	}
	// A member list does not read ("query" for "search") is refused, not ignored: ignored, it
	// would list every record.
	res = h.Invoke(t, "resource.contacts.list", map[string]any{"query": "ann", "limit": 2, "Search": "x"})
	if b, _ := json.Marshal(res.Errors); !res.Refusal() || string(b) != `[`+
		`{"code":"input_unknown","message":"resource.contacts.list reads prefix, after, limit and search, not \"Search\"","field":"Search"},`+
		`{"code":"input_unknown","message":"resource.contacts.list reads prefix, after, limit and search, not \"query\"","field":"query"}]` {
		t.Errorf("list with unknown members = %s", res.JSON)
	}
}

func TestServeResourceOptionMistakes(t *testing.T) {
	a := contactsAgent(t)
	core.ServeResource[contact](a, "contacts", "id",
		core.WithKey("email", func(c map[string]any) string { return "x" }), // another record type
		core.WithKey("mail", contactKey),                                    // no such field
		core.WithOperation("import", core.ActionFunc(nil)))                  // not declared
	_, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}}, a)
	for _, want := range []string{`ServeResource[core_test.contact] "contacts": option core.keyOption[map[string]interface {}] is for another record type`,
		`ServeResource "contacts": WithOperation("import"): the resource declares no such operation`,
		`ServeResource "contacts": WithKey("mail"): the resource declares no such field (name the field the key derives from)`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v\nwant %q", err, want)
		}
	}
}
