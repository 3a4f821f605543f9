// Package contract holds the Supervaizer v2 wire types: the requests Studio sends to /a2a, the
// results handlers return (effects, job_state snapshots, replay safety, setup plans, drafts), the
// registration an agent publishes in its Agent Card (with its builder and every validation rule
// of the reference SDK and the seeds), and the slug and deterministic id of an agent.
//
// Encoding follows the reference exactly: JSON that leaves a controller parses with the reference
// SDK's models and vice versa. Where the reference omits absent members (action results) the types
// omit zero values; where it writes nulls (surface results, registrations) they write nulls.
// Unknown members are kept in each type's Extra and written back, as the reference allows extras.
// Beyond the standard library it depends on golang.org/x/text (Unicode normalization); the
// transliteration of slugs is github.com/mozillazg/go-unidecode's table (MIT), corrected to
// text-unidecode and packed into translit_table.go by go generate.
package contract
