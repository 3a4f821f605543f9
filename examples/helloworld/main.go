// Command helloworld serves the Hello World agent in normal mode, configured from the environment,
// on whatever platform runs it: AWS Lambda, Cloud Run (functions) or a plain HTTP server.
//
//	SUPERVAIZER_API_KEY=... SUPERVAIZER_SERVER_ID=... go run ./examples/helloworld
//
// Outside local mode every /a2a call needs a Studio workspace-grant token; see README.md.
package main

import (
	"github.com/supervaize/svz/adapters/platform"
	"github.com/supervaize/svz/examples/helloworld/hello"
)

func main() { platform.Main(hello.Build) }
