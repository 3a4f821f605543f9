package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// Durability is what a server's settings say of whether records survive: idempotency records
// that vanish let a retried job.start run again.
type Durability struct {
	// Warnings name each setting that puts records at risk, and its fix.
	Warnings []string
	// Unchecked is why the settings could not be read (CONFIG disabled, renamed or not granted,
	// as on most hosted Redis); Warnings is then empty.
	Unchecked error
}

// CheckDurability reads the server's persistence and eviction settings with CONFIG GET, in one
// round trip, and says what puts records at risk.
func CheckDurability(ctx context.Context, client goredis.UniversalClient) Durability {
	names := []string{"appendonly", "save", "maxmemory-policy", "maxmemory"}
	pipe := client.Pipeline()
	cmds := make([]*goredis.MapStringStringCmd, len(names))
	for i, name := range names {
		cmds[i] = pipe.ConfigGet(ctx, name)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Durability{Unchecked: err}
	}
	settings := make(map[string]string)
	for _, c := range cmds {
		for k, v := range c.Val() {
			settings[k] = v
		}
	}
	return durability(settings)
}

// durability judges the settings CONFIG GET gave; a setting it did not give is not judged.
func durability(settings map[string]string) Durability {
	var d Durability
	aof, okAOF := settings["appendonly"]
	save, okSave := settings["save"]
	if okAOF && okSave && aof != "yes" && save == "" {
		d.Warnings = append(d.Warnings, `the server does not persist writes (appendonly no, save ""): a restart forgets every record, `+
			"so retried calls whose first run completed run again; set appendonly yes (appendfsync everysec loses at most a second)")
	}
	if policy, ok := settings["maxmemory-policy"]; ok && policy != "noeviction" {
		limit := settings["maxmemory"]
		if limit == "0" {
			limit = "0, no limit for now"
		}
		d.Warnings = append(d.Warnings, fmt.Sprintf("maxmemory-policy is %s: when memory reaches maxmemory (%s), Redis drops records, "+
			"so retried calls whose first run completed run again; set maxmemory-policy noeviction (a full server then refuses writes, loudly)", policy, limit))
	}
	return d
}
