package idempotency_test

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/testenv"
)

// TestA2AStoreOutageAnswersPromptly: when a networked store stops answering (a paused or
// partitioned server, here a proxy that swallows everything), a job.start fails once the store
// timeout has passed (SUPERVAIZER_STORE_TIMEOUT, 1 s here) with the -32603 of any store failure,
// instead of holding the request until its own deadline; nothing runs.
func TestA2AStoreOutageAnswersPromptly(t *testing.T) {
	for _, tc := range []struct{ kind, variable string }{{"postgres", testenv.PostgresURL}, {"redis", testenv.RedisURL}} {
		t.Run(tc.kind, func(t *testing.T) {
			u, err := url.Parse(testenv.Need(t, tc.variable))
			if err != nil {
				t.Fatal(err)
			}
			p := storetest.NewProxy(t, u.Host)
			u.Host = p.Addr()
			getenv := func(k string) string {
				return map[string]string{storeenv.Kind: tc.kind, storeenv.URL: u.String(), storeenv.Timeout: "1s",
					storeenv.Table: "svz_outage_test"}[k]
			}
			s, err := storeenv.Open(context.Background(), getenv, storeenv.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			a := newAgent()
			base := serve(t, a.controller(t, idempotency.New(s)))
			t.Cleanup(p.Close) // first: the controller's Close waits for nothing that hangs
			p.Blackhole(true)

			got := make(chan string, 1)
			go func() {
				out, err := post(base, params(map[string]any{"idempotency_key": "idem_outage_" + tc.kind}))
				if err != nil {
					out = err.Error()
				}
				got <- out
			}()
			want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Action handler failed","data":{"action":"job.start","agent_slug":"s"}}}`
			select {
			case out := <-got:
				if out != want {
					t.Errorf("job.start during the outage = %s\nwant %s", out, want)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("job.start still waits 60 s into the outage with a 1 s store timeout")
			}
			if a.runs.Load() != 0 {
				t.Error("the handler ran without a claim")
			}
		})
	}
}
