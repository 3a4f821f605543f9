package contract

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/supervaize/svz/internal/golden"
)

func TestIntroductionValidate(t *testing.T) {
	valid := func() Introduction {
		return Introduction{
			Tagline:      "Turns a question into a sourced brief",
			Summary:      "Collects sources, drafts a synthesis and asks for review.",
			ExampleGoals: []string{"Brief me on a market", "Review these three reports"},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*Introduction)
		want []string
	}{
		{"valid", func(*Introduction) {}, nil},
		{"limits reached", func(i *Introduction) {
			i.Tagline = strings.Repeat("é", 120)
			i.Summary = strings.Repeat("s", 300)
			i.ExampleGoals = []string{"1", "2", "3", "4", strings.Repeat("g", 120)}
			i.AvatarURL = "https://cdn.example.com/a.png"
		}, nil},
		{"missing", func(i *Introduction) { *i = Introduction{} }, []string{
			"tagline: String should have at least 1 character",
			"summary: String should have at least 1 character",
			"example_goals: List should have at least 1 item after validation, not 0",
		}},
		{"too long", func(i *Introduction) {
			i.Tagline = strings.Repeat("t", 121)
			i.Summary = strings.Repeat("s", 301)
			i.ExampleGoals = []string{"a", strings.Repeat("g", 121), " "}
		}, []string{
			"tagline: String should have at most 120 characters",
			"summary: String should have at most 300 characters",
			"example_goals[1]: String should have at most 120 characters",
			"example_goals[2]: String should have at least 1 character",
		}},
		{"too many goals", func(i *Introduction) { i.ExampleGoals = []string{"1", "2", "3", "4", "5", "6"} }, []string{
			"example_goals: List should have at most 5 items after validation, not 6",
		}},
		{"avatar not https", func(i *Introduction) { i.AvatarURL = "http://cdn.example.com/a.png" }, []string{"avatar_url: avatar_url must be an https URL"}},
		{"avatar without host", func(i *Introduction) { i.AvatarURL = "https:///a.png" }, []string{"avatar_url: avatar_url must be an https URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := valid()
			tc.edit(&i)
			checkErrors(t, i.Validate(), tc.want)
		})
	}
}

func TestFullDescriptionValidate(t *testing.T) {
	for _, tc := range []struct {
		d    FullDescription
		want []string
	}{
		{FullDescription{Content: "# Research Agent"}, nil},
		{FullDescription{Format: FullDescriptionHTML, Content: strings.Repeat("x", 100000)}, nil},
		{FullDescription{Format: "rst", Content: ""}, []string{
			"format: Input should be 'markdown' or 'html'", "content: String should have at least 1 character",
		}},
		{FullDescription{Content: " \n\t "}, []string{"content: content must not be only whitespace"}},
		{FullDescription{Content: strings.Repeat("x", 100001)}, []string{"content: String should have at most 100000 characters"}},
	} {
		checkErrors(t, tc.d.Validate(), tc.want)
	}
}

func TestValidateBillingCatalog(t *testing.T) {
	for _, tc := range []struct {
		items []BillingCatalogItem
		want  []string
	}{
		{nil, nil},
		{[]BillingCatalogItem{{SKU: "brief", Unit: "brief", Description: "One sourced brief"}, {SKU: "token_1k", Unit: strings.Repeat("u", 32)}}, nil},
		{[]BillingCatalogItem{
			{SKU: "Brief", Unit: "brief"},
			{SKU: strings.Repeat("a", 65), Unit: ""},
			{SKU: "", Unit: strings.Repeat("u", 33), Description: strings.Repeat("d", 256)},
			{SKU: "brief", Unit: "x"},
			{SKU: "brief", Unit: "x"},
		}, []string{
			"[0].sku: String should match pattern '^[a-z0-9_]+$'",
			"[1].sku: String should have at most 64 characters",
			"[1].unit: String should have at least 1 character",
			"[2].sku: String should have at least 1 character",
			"[2].unit: String should have at most 32 characters",
			"[2].description: String should have at most 255 characters",
			"[4].sku: sku 'brief' is declared twice; each sku must be unique in the catalog",
		}},
	} {
		checkErrors(t, ValidateBillingCatalog(tc.items), tc.want)
	}
}

func checkErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("unexpected error: %v", err)
		}
		return
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("error:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

func TestAgentRegistrationContractGolden(t *testing.T) {
	reg := mustBuild(t, helloWorldSpec())
	a := AgentRegistrationContract{
		Name: "Hello World AI Agent", ID: DeterministicAgentID("Hello World AI Agent"),
		Author: ptr("Supervaizer (local test)"), Version: "1.0",
		Description: "Built-in Hello World agent for local testing without Studio.",
		APIPath:     "/agents/hello-world-ai-agent", Slug: Slugify("Hello World AI Agent"),
		Tags:          []string{"hello world", "ai agent", "local"},
		SupervaizerV2: reg,
		Introduction: &Introduction{Tagline: "Says hello", Summary: "A local test agent.",
			ExampleGoals: []string{"Say hello twice"}},
		FullDescription: &FullDescription{Content: "# Hello\n\nSays hello."},
		BillingCatalog:  []BillingCatalogItem{{SKU: "hello", Unit: "message"}},
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	b := mustMarshal(t, a)
	golden.JSON(t, "agent_registration.json", b)

	// Unset presentation blocks are omitted; the rest keeps the reference's defaults.
	a.Introduction, a.FullDescription, a.BillingCatalog, a.SupervaizerV2 = nil, nil, nil, nil
	s := string(mustMarshal(t, a))
	for _, absent := range []string{"introduction", "full_description", "billing_catalog"} {
		if strings.Contains(s, `"`+absent+`"`) {
			t.Errorf("%s should be omitted: %s", absent, s)
		}
	}
	for _, want := range []string{`"server_agent_id":"None"`, `"methods":{}`, `"parameters_setup":[]`, `"max_execution_time":3600`, `"supervaizer_v2":null`, `"developer":null`} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in %s", want, s)
		}
	}
	var back AgentRegistrationContract
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if string(mustMarshal(t, back)) != string(b) {
		t.Error("round trip changed the payload")
	}
	back.SupervaizerV2.Agent.Slug = "other"
	checkErrors(t, back.Validate(), []string{
		"supervaizer_v2.agent.slug: Supervaizer v2 registration agent.slug must match Agent.slug: 'other' != 'hello-world-ai-agent'",
	})
}
