package grant

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// EnvStudioAgentIDs carries the outcome of the Studio registration handshake for instances that do
// not perform it themselves (serverless): "slug=studio-agent-id,slug=studio-agent-id".
const EnvStudioAgentIDs = "SUPERVAIZER_STUDIO_AGENT_IDS"

// ParseStudioAgentIDs reads SUPERVAIZER_STUDIO_AGENT_IDS into slug → Studio agent id. An empty value
// is an empty map (no agent linked to Studio yet: their calls fail agent_not_registered). Spaces
// around entries, slugs and ids are ignored; anything else doubtful is an error naming the
// variable: an empty entry (",,", a trailing comma), an entry without "=", a blank slug or id,
// whitespace, "=" or "," inside a slug or id, the same slug twice, or two slugs sharing one Studio
// id (a token for one would then pass for the other).
func ParseStudioAgentIDs(v string) (map[string]string, error) {
	ids := map[string]string{}
	if strings.TrimSpace(v) == "" {
		return ids, nil
	}
	owner := map[string]string{} // Studio id → slug
	for i, entry := range strings.Split(v, ",") {
		n := i + 1
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("%s: entry %d is empty (expected slug=id,slug=id)", EnvStudioAgentIDs, n)
		}
		slug, id, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("%s: entry %d %q has no \"=\" (expected slug=id)", EnvStudioAgentIDs, n, entry)
		}
		slug, id = strings.TrimSpace(slug), strings.TrimSpace(id)
		switch {
		case slug == "":
			return nil, fmt.Errorf("%s: entry %d %q has an empty agent slug", EnvStudioAgentIDs, n, entry)
		case id == "":
			return nil, fmt.Errorf("%s: entry %d %q has an empty Studio agent id", EnvStudioAgentIDs, n, entry)
		case strings.IndexFunc(slug, badIDRune) >= 0 || strings.IndexFunc(id, badIDRune) >= 0:
			return nil, fmt.Errorf("%s: entry %d %q: slug and id must not contain spaces, control characters or \"=\"", EnvStudioAgentIDs, n, entry)
		}
		if prev, dup := ids[slug]; dup {
			return nil, fmt.Errorf("%s: agent slug %q appears twice (ids %q and %q)", EnvStudioAgentIDs, slug, prev, id)
		}
		if other, dup := owner[id]; dup {
			return nil, fmt.Errorf("%s: Studio agent id %q is given to both %q and %q", EnvStudioAgentIDs, id, other, slug)
		}
		ids[slug], owner[id] = id, slug
	}
	return ids, nil
}

func badIDRune(r rune) bool {
	return r == '=' || unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
}
