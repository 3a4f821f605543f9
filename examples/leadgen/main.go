// Command leadgen serves the lead-generation agent (package leads) on whatever platform runs it:
// AWS Lambda, Cloud Run (functions) or a plain HTTP server, configured from the environment.
//
//	SUPERVAIZER_LOCAL_MODE=true go run ./examples/leadgen
//
// See docs/agents.md for what it does and how it is built.
package main

import (
	"github.com/supervaize/svz/adapters/platform"
	"github.com/supervaize/svz/examples/leadgen/leads"
)

func main() { platform.Main(leads.Build) }
