package deploy

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// LocalRunner runs a built image on this machine the way its platform runs it: the image's
// binary, given the environment the platform gives the controller (secrets as plain values: no
// secret store is contacted), reachable at a loopback URL.
type LocalRunner interface {
	// Start runs img as the service s, with the secrets' values, writing what the controller
	// prints to logs. It returns once the controller has been started, not once it serves.
	Start(ctx context.Context, img v1.Image, s Service, secrets map[string]Secret, logs io.Writer) (*LocalInstance, error)
}

// LocalInstance is a controller started by a LocalRunner.
type LocalInstance struct {
	// URL is where it answers, on loopback.
	URL string
	// How says how it runs, e.g. "under the Lambda Runtime Interface Emulator".
	How string
	// Exited is closed when the controller stops by itself; ExitErr then says how.
	Exited  <-chan struct{}
	ExitErr func() error
	// Stop ends the controller and waits for it.
	Stop func() error
}

// localGateTimeout bounds the retries of the local health gate: nothing is provisioned, so a
// controller that is not healthy by then will not be.
const localGateTimeout = time.Minute

// Local builds the image for this machine, runs it here the way the platform would, and gates on
// health: a dry run of up without a cloud. Nothing is pushed, stored or contacted. With
// Config.Serve the controller keeps serving after the gate until ctx ends.
func (d *Deployer) Local(ctx context.Context) (Result, error) {
	return d.runStages(ctx, "local", d.opening("local"), []stage{d.localSecrets, d.runLocal})
}

// checkLocalHost refuses what cannot run here: the image holds a linux binary of this
// machine's architecture.
func checkLocalHost(arch string) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("svz deploy local runs the image's linux binary on this machine, which runs %s: use a Linux machine, "+
			"or run the agent in local mode (SUPERVAIZER_LOCAL_MODE=true go run ./cmd/agent)", runtime.GOOS)
	}
	if arch != "" && arch != runtime.GOARCH {
		return fmt.Errorf("--arch %s: svz deploy local builds for this machine (linux/%s); leave --arch out", arch, runtime.GOARCH)
	}
	return nil
}

// localSecrets takes each secret the platform delivers from the host, or makes one for this run
// only (never stored, never shown).
func (d *Deployer) localSecrets(_ context.Context, r *run) error {
	r.values = map[string]Secret{}
	return d.step(StepSecrets, "taking secrets from this host", func() (string, error) {
		var problems []error
		var made []string
		for _, spec := range secretSpecs {
			if !d.delivers(spec.Var) {
				continue
			}
			v := NewSecret(d.getenv(spec.Var))
			switch {
			case !v.IsZero() && spec.Check != nil:
				if err := spec.Check(v); err != nil {
					problems = append(problems, fmt.Errorf("%s on this host: %w", spec.Var, err))
					continue
				}
			case v.IsZero() && spec.Generate != nil:
				g, err := spec.Generate()
				if err != nil {
					problems = append(problems, err)
					continue
				}
				v = g
				made = append(made, spec.Var)
			case v.IsZero():
				continue
			}
			r.values[spec.Var] = v
			if spec.Var == EnvAPIKey {
				r.apiKey = v
			}
		}
		if err := joinProblems(problems); err != nil {
			return "", err
		}
		if len(made) > 0 {
			return fmt.Sprintf("%d from this host, %s made for this run only", len(r.values)-len(made), strings.Join(made, " and ")), nil
		}
		return fmt.Sprintf("%d from this host", len(r.values)), nil
	})
}

// runLocal starts the image, gates on health, and stops it (or serves until ctx ends).
func (d *Deployer) runLocal(ctx context.Context, r *run) error {
	if d.Platform.Local == nil {
		return &StepError{Step: StepRun, Err: fmt.Errorf("%s cannot run on this machine", d.Platform.Name)}
	}
	r.res.Image = r.digest.String()
	logs := d.Logs
	tail := &tailBuffer{max: 4 << 10}
	if logs == nil {
		logs = tail
	}
	svc := d.desired(r.res.Image, nil, nil, "", r.work)
	var inst *LocalInstance
	err := d.step(StepRun, "starting the image on this machine as "+d.Platform.Name+" runs it", func() (string, error) {
		var err error
		inst, err = d.Platform.Local.Start(ctx, r.img, svc, r.values, logs)
		if err != nil {
			return "", err
		}
		return inst.How + " at " + inst.URL, nil
	})
	if err != nil {
		return err
	}
	defer func() { _ = inst.Stop() }()
	r.res.URL = inst.URL

	// The gate stops as soon as the controller exits: waiting for an answer would be pointless.
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-inst.Exited:
			cancel()
		case <-gctx.Done():
		}
	}()
	g := *d.gate()
	g.Timeout = min(orDefault(g.Timeout, localGateTimeout), localGateTimeout)
	err = d.step(StepHealth, "checking "+inst.URL, func() (string, error) {
		rep, err := g.Check(gctx, inst.URL, r.apiKey.Reveal())
		select {
		case <-inst.Exited:
			err = fmt.Errorf("the controller stopped before it was healthy: %w", inst.ExitErr())
		default:
		}
		if err != nil {
			return "", err
		}
		r.res.Health = &rep
		return rep.Summary(), nil
	})
	if err != nil {
		if out := tail.String(); out != "" {
			d.note(StepHealth, "the controller printed (last lines):\n"+out)
		}
		return err
	}
	if !d.Config.Serve {
		d.note(StepRun, "stopped (pass --serve to keep it running)")
		return nil
	}
	msg := "serving at " + inst.URL + " until interrupted (Ctrl-C)"
	if d.getenv(EnvAPIKey) == "" {
		msg += "; its API key was made for this run and is not shown: set SUPERVAIZER_API_KEY on this host to call /a2a"
	}
	d.note(StepRun, msg)
	select {
	case <-ctx.Done():
		return nil
	case <-inst.Exited:
		return &StepError{Step: StepRun, Err: fmt.Errorf("the controller stopped: %w", inst.ExitErr())}
	}
}

// tailBuffer keeps the last max bytes written to it, from a line start.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
		if i := strings.IndexByte(string(t.b), '\n'); i >= 0 {
			t.b = t.b[i+1:]
		}
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
