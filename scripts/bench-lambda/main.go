// Command bench-lambda measures, side by side in one run under the AWS Lambda Runtime Interface
// Emulator, the cold start (first invocation of a fresh emulator, which launches the bootstrap)
// and the warm latency of the controller's bootstrap against a minimal aws-lambda-go hello world
// built the same way, and compares their sizes. `make bench-lambda` builds both and runs it.
//
// Runs alternate between the two binaries so that drift on a shared machine hits both alike. The
// controller runs the production configuration (workspace authorization on, Ed25519 key) with the
// in-memory store, so that no network call blurs the comparison.
//
// It prints a Markdown table and exits 1 when a target of issue 14 is missed: cold start within
// 1.10x and size within 1.5x of the hello world.
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/supervaize/svz/internal/syncbuf"
)

// Targets of the issue.
const (
	maxColdRatio = 1.10
	maxSizeRatio = 1.5
)

// event is a Function URL request for the agent list: public, answered by the controller alone.
const event = `{"version":"2.0","routeKey":"$default","rawPath":"/.well-known/agents.json","rawQueryString":"",` +
	`"headers":{"host":"bench.lambda-url.eu-west-3.on.aws","accept":"application/json","x-forwarded-proto":"https"},` +
	`"requestContext":{"domainName":"bench.lambda-url.eu-west-3.on.aws","http":{"method":"GET","path":"/.well-known/agents.json","sourceIp":"203.0.113.1"}},` +
	`"isBase64Encoded":false}`

type config struct {
	rie, svz, hello string
	runs, warm      int
	port            int
}

func main() {
	var cfg config
	flag.StringVar(&cfg.rie, "rie", "aws-lambda-rie", "path of aws-lambda-rie")
	flag.StringVar(&cfg.svz, "svz", "", "the controller's bootstrap")
	flag.StringVar(&cfg.hello, "hello", "", "the hello world bootstrap")
	flag.IntVar(&cfg.runs, "runs", 30, "cold starts per binary")
	flag.IntVar(&cfg.warm, "warm", 50, "warm invocations after each cold start")
	flag.IntVar(&cfg.port, "port", 57090, "first of the two loopback ports the emulator uses")
	flag.Parse()
	if cfg.svz == "" || cfg.hello == "" {
		fmt.Fprintln(os.Stderr, "bench-lambda: -svz and -hello are required")
		os.Exit(2)
	}
	ok, err := run(cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-lambda:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// sample is what one cold run measured.
type sample struct {
	cold time.Duration   // launch to first response, seen by the client
	init time.Duration   // the emulator's INIT REPORT: bootstrap launch to its first /next
	warm []time.Duration // the following invocations
}

type result struct {
	name    string
	size    int64
	samples []sample
}

func run(cfg config, out io.Writer) (bool, error) {
	env, err := controllerEnv()
	if err != nil {
		return false, err
	}
	bins := []*result{{name: "svz bootstrap"}, {name: "aws-lambda-go hello world"}}
	paths := []string{cfg.svz, cfg.hello}
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return false, err
		}
		bins[i].size = fi.Size()
	}
	for r := range cfg.runs {
		for j := range 2 {
			i := (r + j) % 2 // alternate which binary goes first
			s, err := coldRun(cfg, paths[i], env)
			if err != nil {
				return false, fmt.Errorf("%s: %w", bins[i].name, err)
			}
			bins[i].samples = append(bins[i].samples, s)
		}
	}
	return report(out, cfg, bins[0], bins[1]), nil
}

// controllerEnv is the production-like configuration of the controller.
func controllerEnv() ([]string, error) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return []string{
		"SUPERVAIZER_API_KEY=bench-api-key-0123456789",
		"SUPERVAIZER_SERVER_ID=svz-bench-server",
		"SUPERVAIZER_PUBLIC_URL=https://bench.lambda-url.eu-west-3.on.aws",
		"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED=true",
		"SUPERVAIZER_WORKSPACE_AUTH_ISSUER=https://studio.supervaize.com",
		"SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY=" + string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
		"SUPERVAIZER_STORE=memory",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		// Lambda sets TZ=:UTC in every function's environment (the emulator does not): without it
		// the first log line reads /etc/localtime, which no Lambda instance does.
		"TZ=:UTC",
	}, nil
}

var initDuration = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// coldRun starts a fresh emulator with bootstrap, times its first invocation (which launches the
// bootstrap), then the warm ones.
func coldRun(cfg config, bootstrap string, env []string) (sample, error) {
	api, rie := fmt.Sprintf("127.0.0.1:%d", cfg.port), fmt.Sprintf("127.0.0.1:%d", cfg.port+1)
	cmd := exec.Command(cfg.rie, "--runtime-interface-emulator-address", api, "--runtime-api-address", rie, bootstrap)
	cmd.Env = append(os.Environ(), env...)
	var logs syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	if err := waitListening(api, 10*time.Second); err != nil {
		return sample{}, fmt.Errorf("%w\n%s", err, logs.String())
	}
	client := &http.Client{Transport: &http.Transport{}}
	url := "http://" + api + "/2015-03-31/functions/function/invocations"
	invoke := func() (time.Duration, error) {
		start := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(event))
		if err != nil {
			return 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"statusCode":200`)) {
			return 0, fmt.Errorf("invocation answered %d %s\n%s", resp.StatusCode, b, logs.String())
		}
		return took, nil
	}
	var s sample
	var err error
	if s.cold, err = invoke(); err != nil {
		return sample{}, err
	}
	for range cfg.warm {
		d, err := invoke()
		if err != nil {
			return sample{}, err
		}
		s.warm = append(s.warm, d)
	}
	m := initDuration.FindStringSubmatch(logs.String())
	if m == nil {
		return sample{}, errors.New("no INIT REPORT in the emulator's log")
	}
	ms, _ := strconv.ParseFloat(m[1], 64)
	s.init = time.Duration(ms * float64(time.Millisecond))
	return s, nil
}

func waitListening(addr string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the emulator does not listen on %s: %w", addr, err)
		}
		time.Sleep(time.Millisecond)
	}
}

func report(out io.Writer, cfg config, svz, hello *result) bool {
	stats := func(r *result) (cold, init, warm []time.Duration) {
		for _, s := range r.samples {
			cold = append(cold, s.cold)
			init = append(init, s.init)
			warm = append(warm, s.warm...)
		}
		return cold, init, warm
	}
	fmt.Fprintf(out, "%d cold starts and %d warm invocations per binary under aws-lambda-rie, alternating.\n\n", cfg.runs, cfg.runs*cfg.warm)
	fmt.Fprintln(out, "| binary | size | cold start p50 | cold start p90 | init p50 | warm p50 | warm p99 |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|")
	var coldP50 [2]time.Duration
	for i, r := range []*result{svz, hello} {
		cold, init, warm := stats(r)
		coldP50[i] = pct(cold, 50)
		fmt.Fprintf(out, "| %s | %.2f MB | %s | %s | %s | %s | %s |\n", r.name, float64(r.size)/1e6,
			ms(coldP50[i]), ms(pct(cold, 90)), ms(pct(init, 50)), ms(pct(warm, 50)), ms(pct(warm, 99)))
	}
	coldRatio := float64(coldP50[0]) / float64(coldP50[1])
	sizeRatio := float64(svz.size) / float64(hello.size)
	okCold, okSize := coldRatio <= maxColdRatio, sizeRatio <= maxSizeRatio
	fmt.Fprintf(out, "\ncold start: %.2fx the hello world (target ≤ %.2fx) %s\n", coldRatio, maxColdRatio, verdict(okCold))
	fmt.Fprintf(out, "size:       %.2fx the hello world (target ≤ %.2fx) %s\n", sizeRatio, maxSizeRatio, verdict(okSize))
	return okCold && okSize
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// pct returns the p-th percentile (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
