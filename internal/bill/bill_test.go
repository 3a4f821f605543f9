package bill_test

import (
	"context"
	"fmt"
	"maps"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/bill"
	"github.com/supervaize/svz/internal/callbench"
	"github.com/supervaize/svz/internal/testenv"
)

// The call kinds metered, in the order printed.
var kinds = []string{"job.start new keyed", "job.start replay", "surface.load", "job.start unkeyed"}

// meteredTable creates a DynamoDB table on moto and returns the metering proxy in front of it
// and the store settings (KEY=VALUE) that reach the table through it.
func meteredTable(t testing.TB, name string) (*bill.DynamoDB, []string) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	_, table := dynamodbtest.Table(t, endpoint, name)
	meter, err := bill.NewDynamoDB(endpoint, "ix")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(meter)
	t.Cleanup(srv.Close)
	return meter, dynamodbtest.Env(srv.URL, table)
}

// settingsOf is env (KEY=VALUE) as a map, with extra added.
func settingsOf(env []string, extra map[string]string) map[string]string {
	out := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	maps.Copy(out, extra)
	return out
}

// meterDynamoDB runs each call kind rounds times against Hello World on a DynamoDB table behind
// the metering proxy and returns the usage of one call of each kind.
func meterDynamoDB(t testing.TB, rounds int) map[string]bill.Usage {
	meter, env := meteredTable(t, "bill")
	settings := settingsOf(env, nil)
	out := map[string]bill.Usage{}
	calls(t, settings, rounds, func() any { return meter.Usage() }, func(kind string, before, after any) {
		out[kind] = out[kind].Add(after.(bill.Usage).Sub(before.(bill.Usage)))
	})
	for k, u := range out {
		out[k] = u.Per(rounds)
	}
	return out
}

// boundCount is the effect log's count bound of the at-the-bound meter: small, so that the log
// reaches it within the warm-up.
const boundCount = 5

// meterAtBound returns the mean usage of an unkeyed job.start over rounds calls once the effect log
// is at its retention bound (SUPERVAIZER_EVENT_RETENTION_COUNT boundCount, the default age bound):
// the steady state of a controller whose log is full, where each append may also reclaim space.
func meterAtBound(t testing.TB, rounds int) bill.Usage {
	meter, env := meteredTable(t, "bound")
	settings := settingsOf(env, map[string]string{"SUPERVAIZER_EVENT_RETENTION_COUNT": strconv.Itoa(boundCount)})
	cb, err := callbench.NewWith(context.Background(), settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cb.Controller.Close() })
	var before bill.Usage
	for i := range 2*boundCount + dynamodb.LogReclaimBatch + rounds {
		if i == 2*boundCount+dynamodb.LogReclaimBatch {
			before = meter.Usage()
		}
		rec := httptest.NewRecorder()
		cb.Controller.ServeHTTP(rec, cb.Request(cb.JobStartBody, cb.Token))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"result":{`) {
			t.Fatalf("call: %d %s", rec.Code, rec.Body)
		}
	}
	return meter.Usage().Sub(before).Per(rounds)
}

// meterRoundTrips runs each call kind rounds times against Hello World on the PostgreSQL or
// Redis server at rawURL, through a counting TCP proxy, and returns the round trips of one call
// of each kind.
func meterRoundTrips(t testing.TB, kind, rawURL string, rounds int) map[string]float64 {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := storetest.NewProxy(t, u.Host)
	u.Host = p.Addr()
	settings := map[string]string{"SUPERVAIZER_STORE": kind, "SUPERVAIZER_STORE_URL": u.String()}
	if kind == "postgres" {
		settings["SUPERVAIZER_STORE_TABLE"] = testenv.UniqueName("bill_")
	}
	out := map[string]float64{}
	calls(t, settings, rounds, func() any { return p.RoundTrips() }, func(kind string, before, after any) {
		out[kind] += float64(after.(int)-before.(int)) / float64(rounds)
	})
	return out
}

// calls builds Hello World with settings, warms it up (connections, prepared statements,
// scripts, the log's head) with one call of each kind, then sends each kind rounds times,
// reporting the counter around each call.
func calls(t testing.TB, settings map[string]string, rounds int, counter func() any, report func(kind string, before, after any)) {
	t.Helper()
	cb, err := callbench.NewWith(context.Background(), settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cb.Controller.Close() })
	send := func(body []byte) {
		rec := httptest.NewRecorder()
		cb.Controller.ServeHTTP(rec, cb.Request(body, cb.Token))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"result":{`) || strings.Contains(rec.Body.String(), `"status":"error"`) {
			t.Fatalf("call: %d %s", rec.Code, rec.Body)
		}
	}
	for round := -1; round < rounds; round++ {
		key := fmt.Sprintf("bill-%d", round)
		bodies := map[string][]byte{
			"job.start new keyed": callbench.KeyedJobStartBody(key),
			"job.start replay":    callbench.KeyedJobStartBody(key),
			"surface.load":        cb.SurfaceLoadBody,
			"job.start unkeyed":   cb.JobStartBody,
		}
		for _, k := range kinds {
			before := counter()
			send(bodies[k])
			if round >= 0 {
				report(k, before, counter())
			}
		}
	}
}

// TestBillUnits pins what each call kind costs in the store, so that a change that adds a write
// or a round trip fails here (the figures of docs/performance.md, printed by make bench-bill).
func TestBillUnits(t *testing.T) {
	t.Run("dynamodb", func(t *testing.T) {
		got := meterDynamoDB(t, 2)
		want := map[string][2]float64{ // WCU, RCU
			"job.start new keyed": {wantKeyedWCU, 0},
			"job.start replay":    {wantReplayWCU, 0},
			"surface.load":        {0, 0},
			"job.start unkeyed":   {wantUnkeyedWCU, 0},
		}
		for _, k := range kinds {
			if u := got[k]; u.WCU != want[k][0] || u.RCU != want[k][1] {
				t.Errorf("%s: %.2f WCU, %.2f RCU (%s); want %.0f WCU, %.0f RCU", k, u.WCU, u.RCU, u.Ops(), want[k][0], want[k][1])
			}
		}
	})
	t.Run("dynamodb at the bound", func(t *testing.T) {
		// Two reclaim batches' worth: a reclaiming append would show above the mean.
		if u := meterAtBound(t, 2*dynamodb.LogReclaimBatch); u.WCU != wantUnkeyedWCU || u.RCU != 0 {
			t.Errorf("job.start unkeyed, the log at its bound: %.2f WCU, %.2f RCU a call (%s); want %d WCU, 0 RCU",
				u.WCU, u.RCU, u.Ops(), wantUnkeyedWCU)
		}
	})
	for _, tc := range []struct {
		kind, env string
	}{{"postgres", testenv.PostgresURL}, {"redis", testenv.RedisURL}} {
		t.Run(tc.kind, func(t *testing.T) {
			got := meterRoundTrips(t, tc.kind, testenv.Need(t, tc.env), 2)
			want := map[string]float64{"job.start new keyed": wantKeyedTrips, "job.start replay": 1, "surface.load": 0, "job.start unkeyed": 1}
			for _, k := range kinds {
				if got[k] != want[k] {
					t.Errorf("%s: %.2f round trips, want %.0f", k, got[k], want[k])
				}
			}
		})
	}
}

// BenchmarkBill prints the bill per call kind (make bench-bill): DynamoDB requests and units
// with their dollars per million calls, and PostgreSQL and Redis round trips. It measures
// counts, not time: one iteration is enough.
func BenchmarkBill(b *testing.B) {
	for b.Loop() {
	}
	const rounds = 5
	ddb := meterDynamoDB(b, rounds)
	pg := meterRoundTrips(b, "postgres", testenv.Need(b, testenv.PostgresURL), rounds)
	rd := meterRoundTrips(b, "redis", testenv.Need(b, testenv.RedisURL), rounds)
	bound := meterAtBound(b, 4*dynamodb.LogReclaimBatch)
	job := meterJob(b, rounds)
	w := os.Stdout
	fmt.Fprintf(w, "\nDynamoDB (on-demand list prices: $%.3f per million WRU, $%.3f per million RRU)\n", bill.PerMillionWRU, bill.PerMillionRRU)
	fmt.Fprintf(w, "%-22s %-52s %6s %9s %6s %14s\n", "call", "requests", "WCU", "(index)", "RCU", "$ per M calls")
	for _, k := range kinds {
		u := ddb[k]
		fmt.Fprintf(w, "%-22s %-52s %6.2f %9.2f %6.2f %14.3f\n", k, u.Ops(), u.WCU, u.IndexWCU, u.RCU, u.Dollars())
	}
	fmt.Fprintf(w, "%-22s %-52s %6.2f %9.2f %6.2f %14.3f\n", "unkeyed, log at bound", bound.Ops(), bound.WCU, bound.IndexWCU, bound.RCU, bound.Dollars())
	fmt.Fprintf(w, "%-22s %-52s %6.2f %9.2f %6.2f %14.3f\n", fmt.Sprintf("a %d-step job", jobSteps), job.Ops(), job.WCU, job.IndexWCU, job.RCU, job.Dollars())
	fmt.Fprintf(w, "Lambda, for comparison: $%.2f per million requests, $%.4f per million calls per ms at 256 MB\n",
		bill.PerMillionLambdaReqs, bill.LambdaPerMs256MB*1e6)
	fmt.Fprintf(w, "\nRound trips per call\n%-22s %9s %6s\n", "call", "postgres", "redis")
	for _, k := range kinds {
		fmt.Fprintf(w, "%-22s %9.2f %6.2f\n", k, pg[k], rd[k])
	}
	b.ReportMetric(ddb["job.start new keyed"].WCU, "keyed-WCU")
	b.ReportMetric(ddb["job.start new keyed"].Dollars(), "keyed-$/Mcalls")
}
