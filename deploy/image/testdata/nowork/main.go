// Command nowork links package core/jobs without defining work (DefinesBackgroundWork's test).
package main

import (
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/jobs"
)

func main() {
	a, err := core.NewAgent(core.AgentConfig{Name: "w", Version: "1"})
	if err != nil {
		panic(err)
	}
	println(a.Works().Len(), jobs.DefaultTimeout.String())
}
