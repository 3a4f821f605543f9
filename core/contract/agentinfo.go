package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Limits of the agent presentation blocks (seeds: Introduction, Description complète, Catalogue
// de facturation).
const (
	IntroductionTaglineMaxLength = 120
	IntroductionSummaryMaxLength = 300
	IntroductionGoalMaxLength    = 120
	IntroductionMaxGoals         = 5
	FullDescriptionMaxLength     = 100000
	BillingSKUMaxLength          = 64
	BillingUnitMaxLength         = 32
	BillingDescriptionMaxLength  = 255
)

// Full description formats.
const (
	FullDescriptionMarkdown = "markdown"
	FullDescriptionHTML     = "html"
)

// msgAtMost is pydantic's max_length message.
const (
	msgAtMost = "String should have at most %d characters"
)

// Introduction is the block Studio builds the agent-list entry and the conversation opening from
// (V2AgentIntroduction). Without it the agent shows its name and description only. AvatarURL is
// written as null when empty.
type Introduction struct {
	Tagline      string   `json:"tagline"`       // required, plain text, at most 120 characters
	Summary      string   `json:"summary"`       // required, what the agent does, at most 300
	ExampleGoals []string `json:"example_goals"` // 1 to 5 suggested first messages, at most 120 each
	AvatarURL    string   `json:"avatar_url"`    // optional https URL
	Extra        Extra    `json:"-"`
}

// FullDescription is the detailed description Studio shows on the agent's page
// (V2AgentFullDescription). Studio sanitizes HTML (including HTML rendered from markdown) before
// display. An empty Format is markdown.
type FullDescription struct {
	Format  string `json:"format"`  // markdown (default) or html
	Content string `json:"content"` // 1 to 100000 characters, not only whitespace
	Extra   Extra  `json:"-"`
}

// BillingCatalogItem names a SKU the agent may report consumption for (BillingCatalogItem). The
// catalog has no prices: the owning workspace prices each SKU in Studio.
type BillingCatalogItem struct {
	SKU         string `json:"sku"`         // 1 to 64 characters of [a-z0-9_], unique in the catalog
	Unit        string `json:"unit"`        // 1 to 32 characters, e.g. minute or token
	Description string `json:"description"` // at most 255 characters, "" by default
	Extra       Extra  `json:"-"`
}

func tooLong(s string, limit int) bool { return utf8.RuneCountInString(s) > limit }

// Validate reports every reason i is not a valid introduction, or nil.
func (i *Introduction) Validate() error {
	var p problems
	switch {
	case strings.TrimSpace(i.Tagline) == "":
		p.add("tagline", msgNonEmpty)
	case tooLong(i.Tagline, IntroductionTaglineMaxLength):
		p.add("tagline", msgAtMost, IntroductionTaglineMaxLength)
	}
	switch {
	case strings.TrimSpace(i.Summary) == "":
		p.add("summary", msgNonEmpty)
	case tooLong(i.Summary, IntroductionSummaryMaxLength):
		p.add("summary", msgAtMost, IntroductionSummaryMaxLength)
	}
	switch n := len(i.ExampleGoals); {
	case n == 0:
		p.add("example_goals", "List should have at least 1 item after validation, not 0")
	case n > IntroductionMaxGoals:
		p.add("example_goals", "List should have at most %d items after validation, not %d", IntroductionMaxGoals, n)
	}
	for k, g := range i.ExampleGoals {
		at := fmt.Sprintf("example_goals[%d]", k)
		switch {
		case strings.TrimSpace(g) == "":
			p.add(at, msgNonEmpty)
		case tooLong(g, IntroductionGoalMaxLength):
			p.add(at, msgAtMost, IntroductionGoalMaxLength)
		}
	}
	if i.AvatarURL != "" {
		u, err := url.Parse(i.AvatarURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			p.add("avatar_url", "avatar_url must be an https URL")
		}
	}
	return errors.Join(p...)
}

// Validate reports every reason d is not a valid full description, or nil.
func (d *FullDescription) Validate() error {
	var p problems
	switch d.Format {
	case "", FullDescriptionMarkdown, FullDescriptionHTML:
	default:
		p.add("format", "Input should be 'markdown' or 'html'")
	}
	switch {
	case d.Content == "":
		p.add("content", msgNonEmpty)
	case strings.TrimSpace(d.Content) == "":
		p.add("content", "content must not be only whitespace")
	case tooLong(d.Content, FullDescriptionMaxLength):
		p.add("content", msgAtMost, FullDescriptionMaxLength)
	}
	return errors.Join(p...)
}

// Validate reports every reason b is not a valid catalog item, or nil. Uniqueness is checked by
// ValidateBillingCatalog.
func (b *BillingCatalogItem) Validate() error {
	var p problems
	switch {
	case b.SKU == "":
		p.add("sku", msgNonEmpty)
	case tooLong(b.SKU, BillingSKUMaxLength):
		p.add("sku", msgAtMost, BillingSKUMaxLength)
	case !validSKU(b.SKU):
		p.add("sku", "String should match pattern '^[a-z0-9_]+$'")
	}
	switch {
	case b.Unit == "":
		p.add("unit", msgNonEmpty)
	case tooLong(b.Unit, BillingUnitMaxLength):
		p.add("unit", msgAtMost, BillingUnitMaxLength)
	}
	if tooLong(b.Description, BillingDescriptionMaxLength) {
		p.add("description", msgAtMost, BillingDescriptionMaxLength)
	}
	return errors.Join(p...)
}

// validSKU matches ^[a-z0-9_]+$.
func validSKU(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '_') {
			return false
		}
	}
	return s != ""
}

// ValidateBillingCatalog reports every reason items is not a valid billing catalog (each item
// valid, SKUs unique), or nil. An empty catalog is valid: it is simply not sent.
func ValidateBillingCatalog(items []BillingCatalogItem) error {
	var p problems
	seen := make(map[string]bool, len(items))
	for k := range items {
		at := fmt.Sprintf("[%d]", k)
		p.addErr(at, items[k].Validate())
		if sku := items[k].SKU; sku != "" {
			if seen[sku] {
				p.add(at+".sku", "sku '%s' is declared twice; each sku must be unique in the catalog", sku)
			}
			seen[sku] = true
		}
	}
	return errors.Join(p...)
}

// MarshalJSON writes the introduction; avatar_url null when empty.
func (i Introduction) MarshalJSON() ([]byte, error) {
	type wire struct {
		Tagline      string     `json:"tagline"`
		Summary      string     `json:"summary"`
		ExampleGoals []string   `json:"example_goals"`
		AvatarURL    nullString `json:"avatar_url"`
	}
	return encodeObject(wire{i.Tagline, i.Summary, nonNil(i.ExampleGoals), nullString(i.AvatarURL)}, i.Extra)
}

// UnmarshalJSON decodes the introduction, keeping unknown members.
func (i *Introduction) UnmarshalJSON(data []byte) error {
	type wire struct {
		Tagline      string     `json:"tagline"`
		Summary      string     `json:"summary"`
		ExampleGoals []string   `json:"example_goals"`
		AvatarURL    nullString `json:"avatar_url"`
	}
	var w wire
	var extra Extra
	if err := decodeInto(data, "introduction", &w, &extra); err != nil {
		return err
	}
	*i = Introduction{Tagline: w.Tagline, Summary: w.Summary, ExampleGoals: w.ExampleGoals, AvatarURL: string(w.AvatarURL), Extra: extra}
	return nil
}

// MarshalJSON writes the description; format markdown when empty.
func (d FullDescription) MarshalJSON() ([]byte, error) {
	type plain FullDescription
	p := plain(d)
	p.Format = orDefault(p.Format, FullDescriptionMarkdown)
	return encodeObject(p, d.Extra)
}

// UnmarshalJSON decodes the description; an absent format is markdown.
func (d *FullDescription) UnmarshalJSON(data []byte) error {
	type plain FullDescription
	p := plain{Format: FullDescriptionMarkdown}
	if err := decodeInto(data, "full_description", &p, &p.Extra); err != nil {
		return err
	}
	*d = FullDescription(p)
	return nil
}

// MarshalJSON writes the item.
func (b BillingCatalogItem) MarshalJSON() ([]byte, error) {
	type plain BillingCatalogItem
	return encodeObject(plain(b), b.Extra)
}

// UnmarshalJSON decodes the item, keeping unknown members.
func (b *BillingCatalogItem) UnmarshalJSON(data []byte) error {
	type plain BillingCatalogItem
	return decodeInto(data, "billing catalog item", (*plain)(b), &b.Extra)
}

// AgentRegistrationContract is one agent of the server.register payload (and of agent.register):
// the reference's agent registration_info. Unset optional members are written as null, except
// Introduction, FullDescription and BillingCatalog, which are omitted when unset; Methods is {}
// for a v2-only agent and ServerAgentID is the string "None" when the agent is not linked to
// Studio yet (the reference formats it with an f-string).
type AgentRegistrationContract struct {
	Name                        string               `json:"name"`
	ID                          string               `json:"id"`
	Author                      *string              `json:"author"`
	Developer                   *string              `json:"developer"`
	Maintainer                  *string              `json:"maintainer"`
	Editor                      *string              `json:"editor"`
	Version                     string               `json:"version"`
	ReleaseNotesURL             *string              `json:"release_notes_url"`
	Description                 string               `json:"description"`
	APIPath                     string               `json:"api_path"` // /agents/<slug>
	Slug                        string               `json:"slug"`
	Tags                        []string             `json:"tags"`
	Methods                     json.RawMessage      `json:"methods"`          // {} when empty
	ParametersSetup             json.RawMessage      `json:"parameters_setup"` // [] when empty
	ServerAgentID               string               `json:"server_agent_id"`  // "None" when empty
	ServerAgentStatus           *string              `json:"server_agent_status"`
	ServerAgentOnboardingStatus *string              `json:"server_agent_onboarding_status"`
	MaxExecutionTime            int                  `json:"max_execution_time"` // 3600 when 0
	InstructionsPath            *string              `json:"instructions_path"`
	DataResources               json.RawMessage      `json:"data_resources"` // [] when empty
	SupervaizerV2               *Registration        `json:"supervaizer_v2"`
	Introduction                *Introduction        `json:"introduction,omitzero"`
	FullDescription             *FullDescription     `json:"full_description,omitzero"`
	BillingCatalog              []BillingCatalogItem `json:"billing_catalog,omitzero"`
	Extra                       Extra                `json:"-"`
}

// Validate reports every reason a is not a valid agent registration payload, or nil.
func (a *AgentRegistrationContract) Validate() error {
	var p problems
	p.nonEmpty("name", a.Name)
	p.nonEmpty("slug", a.Slug)
	p.nonEmpty("api_path", a.APIPath)
	if a.SupervaizerV2 != nil {
		p.addErr("supervaizer_v2", a.SupervaizerV2.Validate())
		if s := a.SupervaizerV2.Agent.Slug; s != a.Slug {
			p.add("supervaizer_v2.agent.slug", "Supervaizer v2 registration agent.slug must match Agent.slug: '%s' != '%s'", s, a.Slug)
		}
	}
	if a.Introduction != nil {
		p.addErr("introduction", a.Introduction.Validate())
	}
	if a.FullDescription != nil {
		p.addErr("full_description", a.FullDescription.Validate())
	}
	p.addErr("billing_catalog", ValidateBillingCatalog(a.BillingCatalog))
	return errors.Join(p...)
}

// MarshalJSON writes the payload with the reference's defaults.
func (a AgentRegistrationContract) MarshalJSON() ([]byte, error) {
	type plain AgentRegistrationContract
	p := plain(a)
	p.Tags = nonNil(p.Tags)
	if len(p.Methods) == 0 {
		p.Methods = json.RawMessage("{}")
	}
	if len(p.ParametersSetup) == 0 {
		p.ParametersSetup = json.RawMessage("[]")
	}
	if len(p.DataResources) == 0 {
		p.DataResources = json.RawMessage("[]")
	}
	p.ServerAgentID = orDefault(p.ServerAgentID, "None")
	if p.MaxExecutionTime == 0 {
		p.MaxExecutionTime = 3600
	}
	return encodeObject(p, a.Extra)
}

// UnmarshalJSON decodes the payload, keeping unknown members.
func (a *AgentRegistrationContract) UnmarshalJSON(data []byte) error {
	type plain AgentRegistrationContract
	return decodeInto(data, "agent registration", (*plain)(a), &a.Extra)
}
