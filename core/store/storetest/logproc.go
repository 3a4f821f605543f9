package storetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
)

// logChildEnv makes a test binary an appender process: "<log name>|<writer>|<count>|<go file>".
const logChildEnv = "SVZ_STORETEST_LOG_APPENDER"

// LogProcesses and LogProcessAppends size RunLogProcesses.
const (
	LogProcesses      = 3
	LogProcessAppends = 30
)

// LogProcessMain turns a test binary started by RunLogProcesses into an appender process: it opens
// the store with open (which reads what it needs from the environment the parent passed), waits
// for the parent's signal, appends, prints each position and exits. Call it first in TestMain; in
// a normal test run it returns at once.
func LogProcessMain(open func(ctx context.Context) (store.Store, error)) {
	spec := os.Getenv(logChildEnv)
	if spec == "" {
		return
	}
	if err := appendProcess(spec, open); err != nil {
		fmt.Fprintln(os.Stderr, "appender:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func appendProcess(spec string, open func(ctx context.Context) (store.Store, error)) error {
	f := strings.Split(spec, "|")
	if len(f) != 4 {
		return fmt.Errorf("%s=%q: want name|writer|count|file", logChildEnv, spec)
	}
	count, err := strconv.Atoi(f[2])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	l, ok := s.(store.Log)
	if !ok {
		return fmt.Errorf("%T does not implement store.Log", s)
	}
	for { // start with the other processes, to append at the same time
		if _, err := os.Stat(f[3]); err == nil {
			break
		}
		if ctx.Err() != nil {
			return errors.New("no start signal")
		}
		time.Sleep(5 * time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := range count {
		p, err := l.AppendLog(ctx, f[0], fmt.Appendf(nil, "p%s-%d", f[1], i), store.Retention{})
		if err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
		fmt.Fprintf(out, "%d %s\n", p.Seq, p.Epoch)
	}
	return out.Flush()
}

// RunLogProcesses checks ordering across processes: LogProcesses copies of the running test
// binary (whose TestMain calls LogProcessMain) append LogProcessAppends entries each to one log, at
// once, while this process follows the log with a store from open. Positions must be dense and
// unique, each process's entries in its order, and the follower must see every entry once, in
// order. env is added to the children's environment (e.g. the table to use).
func RunLogProcesses(t *testing.T, open Opener, env []string, opts ...LogOption) {
	var lo logOptions
	for _, o := range opts {
		o(&lo)
	}
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	follower := AsLog(t, open(t, time.Now))
	t.Cleanup(func() { _ = follower.(store.Store).Close() })
	name := "storetest/" + randomHex(8) + "/processes"
	start := filepath.Join(t.TempDir(), "go")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	type child struct {
		cmd    *exec.Cmd
		stdout bytes.Buffer
		stderr bytes.Buffer
	}
	children := make([]*child, LogProcesses)
	for w := range children {
		ch := &child{cmd: exec.CommandContext(ctx, self, "-test.run=^$")}
		ch.cmd.Env = append(append(os.Environ(), env...),
			fmt.Sprintf("%s=%s|%d|%d|%s", logChildEnv, name, w, LogProcessAppends, start))
		ch.cmd.Stdout, ch.cmd.Stderr = &ch.stdout, &ch.stderr
		if err := ch.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[w] = ch
	}
	followed := make(chan []store.LogEntry, 1)
	go func() { followed <- Follow(ctx, follower, name, 0, LogProcesses*LogProcessAppends) }()
	if err := os.WriteFile(start, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make([][]store.LogPosition, LogProcesses)
	for w, ch := range children {
		if err := ch.cmd.Wait(); err != nil {
			t.Fatalf("appender process %d: %v\n%s", w, err, ch.stderr.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(ch.stdout.String()), "\n") {
			seq, epoch, _ := strings.Cut(line, " ")
			n, err := strconv.ParseUint(seq, 10, 64)
			if err != nil {
				t.Fatalf("appender process %d printed %q", w, line)
			}
			got[w] = append(got[w], store.LogPosition{Epoch: epoch, Seq: n})
		}
		if len(got[w]) != LogProcessAppends {
			t.Fatalf("appender process %d made %d appends, want %d", w, len(got[w]), LogProcessAppends)
		}
	}
	all := checkConcurrentLog(t, follower, name, got, func(w, i int) string { return fmt.Sprintf("p%d-%d", w, i) }, lo)
	select {
	case entries := <-followed:
		checkFollowed(t, entries, all)
	case <-ctx.Done():
		t.Fatal("the follower did not see every entry within 3 minutes")
	}
}
