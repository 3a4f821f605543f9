// Command bench-http compares, over HTTP with wrk, the requests per second of the controller
// (Hello World in normal mode: Ed25519 token already seen, memory store) with those of the floor
// handler (decode the body into a map, encode an answer of the same size), both from
// internal/callbench and both served by net/http on 127.0.0.1. `make bench-http` runs it.
//
// Short runs alternate between the two servers, so that drift on a shared machine hits both
// alike: the ratio of each adjacent pair of runs is taken, and the median of those ratios is the
// figure. It prints a Markdown table and exits 1 when the controller serves fewer than 0.7x the
// floor's requests per second (the goal of issue 14).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/internal/callbench"
)

const minRatio = 0.7

type config struct {
	wrk                   string
	rounds, conns, thread int
	duration              time.Duration
}

func main() {
	var cfg config
	flag.StringVar(&cfg.wrk, "wrk", "wrk", "path of wrk")
	flag.IntVar(&cfg.rounds, "rounds", 10, "runs per server and call (alternating)")
	flag.IntVar(&cfg.conns, "connections", 32, "wrk connections")
	flag.IntVar(&cfg.thread, "threads", 1, "wrk threads")
	flag.DurationVar(&cfg.duration, "duration", 2*time.Second, "length of one wrk run")
	flag.Parse()
	ok, err := run(context.Background(), cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-http:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, out io.Writer) (bool, error) {
	if _, err := exec.LookPath(cfg.wrk); err != nil {
		return false, fmt.Errorf("wrk not found (apt-get install wrk, or -wrk PATH): %w", err)
	}
	cb, err := callbench.New(ctx)
	if err != nil {
		return false, err
	}
	defer cb.Controller.Close()
	floorURL, stopFloor, err := serve(cb.Floor)
	if err != nil {
		return false, err
	}
	defer stopFloor()
	ctlURL, stopCtl, err := serve(cb.Controller)
	if err != nil {
		return false, err
	}
	defer stopCtl()
	dir, err := os.MkdirTemp("", "svz-bench-http")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)

	fmt.Fprintf(out, "wrk: %d connection(s), %d thread(s), %s per run, %d alternating runs per server\n\n", cfg.conns, cfg.thread, cfg.duration, cfg.rounds)
	fmt.Fprintln(out, "| call | floor req/s (median) | controller req/s (median) | controller / floor (median of pairs) |")
	fmt.Fprintln(out, "|---|---|---|---|")
	ok := true
	for _, c := range []struct {
		name string
		body []byte
	}{{"surface.load", cb.SurfaceLoadBody}, {"job.start", cb.JobStartBody}} {
		script, err := luaScript(dir, c.name, c.body, cb.Token)
		if err != nil {
			return false, err
		}
		// The floor always answers the same document: it is fed the surface.load body.
		floorScript, err := luaScript(dir, "floor-"+c.name, cb.SurfaceLoadBody, cb.Token)
		if err != nil {
			return false, err
		}
		var floor, ctl, ratios []float64
		for round := range cfg.rounds {
			var f, s float64
			floorRun := func() (err error) {
				if f, err = wrk(ctx, cfg, floorScript, floorURL); err != nil {
					err = fmt.Errorf("floor: %w", err)
				}
				return err
			}
			ctlRun := func() (err error) {
				if s, err = wrk(ctx, cfg, script, ctlURL); err != nil {
					err = fmt.Errorf("controller: %w", err)
				}
				return err
			}
			first, second := floorRun, ctlRun
			if round%2 == 1 { // which side runs first alternates too
				first, second = ctlRun, floorRun
			}
			if err := first(); err != nil {
				return false, fmt.Errorf("%s: %w", c.name, err)
			}
			if err := second(); err != nil {
				return false, fmt.Errorf("%s: %w", c.name, err)
			}
			floor, ctl, ratios = append(floor, f), append(ctl, s), append(ratios, s/f)
		}
		ratio := median(ratios)
		mark := ""
		if ratio < minRatio {
			ok, mark = false, fmt.Sprintf(" (goal ≥ %.1fx)", minRatio)
		}
		fmt.Fprintf(out, "| %s | %.0f | %.0f | **%.2fx**%s |\n", c.name, median(floor), median(ctl), ratio, mark)
	}
	return ok, nil
}

// serve runs h on a fresh loopback port.
func serve(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/a2a", func() { _ = srv.Close() }, nil
}

// luaScript writes the wrk script that POSTs body with the API key and token.
func luaScript(dir, name string, body []byte, token string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "wrk.method = %q\n", http.MethodPost)
	fmt.Fprintf(&b, "wrk.body = %s\n", strconv.Quote(string(body)))
	fmt.Fprintf(&b, "wrk.headers[%q] = %q\n", "Content-Type", "application/json")
	fmt.Fprintf(&b, "wrk.headers[%q] = %q\n", "X-API-Key", callbench.APIKey)
	fmt.Fprintf(&b, "wrk.headers[%q] = %q\n", core.GrantHeader, token)
	path := filepath.Join(dir, name+".lua")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

var (
	rpsLine     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	non2xxLine  = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
	socketError = regexp.MustCompile(`Socket errors:.*`)
)

// wrk runs one load and returns its requests per second; any error answer fails the run.
func wrk(ctx context.Context, cfg config, script, url string) (float64, error) {
	cmd := exec.CommandContext(ctx, cfg.wrk, "-t", strconv.Itoa(cfg.thread), "-c", strconv.Itoa(cfg.conns),
		"-d", cfg.duration.String(), "-s", script, url)
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, out)
	}
	if m := non2xxLine.FindStringSubmatch(out); m != nil {
		return 0, fmt.Errorf("%s error answers:\n%s", m[1], out)
	}
	if m := socketError.FindString(out); m != "" {
		return 0, fmt.Errorf("%s\n%s", m, out)
	}
	m := rpsLine.FindStringSubmatch(out)
	if m == nil {
		return 0, errors.New("no Requests/sec in wrk's output:\n" + out)
	}
	return strconv.ParseFloat(m[1], 64)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
