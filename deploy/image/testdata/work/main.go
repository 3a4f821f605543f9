// Command work defines background work (DefinesBackgroundWork's test).
package main

import (
	"context"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/jobs"
)

func main() {
	a, err := core.NewAgent(core.AgentConfig{Name: "w", Version: "1"})
	if err != nil {
		panic(err)
	}
	jobs.Define(a, "w", func(context.Context, struct{ N int }) error { return nil })
}
