package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2/google"
	"golang.org/x/term"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/apprunner"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/cloudrun"
	"github.com/supervaize/svz/deploy/lambda"
)

// deployFlags are the flags of svz deploy and its subcommands.
type deployFlags struct {
	cfg    deploy.Config
	output string
	yes    bool
	rie    string // local: path of aws-lambda-rie
}

// newDeployCmd is `svz deploy plan|up|local|down|status`.
func newDeployCmd() *cobra.Command {
	f := &deployFlags{}
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Build, deploy and check a controller on Cloud Run, App Runner or Lambda",
		Long: `Build the controller's main package into a daemonless OCI image, push it, keep its secrets in the
platform's secret manager, create or update the service, and gate the result on a health check that
uses the stored API key (rolling back on failure). "local" runs the same image on this machine the
way the platform would, and gates it, without a cloud.

Resources are named {name}-{env}. Credentials come from the AWS default chain (AWS_PROFILE,
AWS_REGION, AWS_ENDPOINT_URL...) or Google Application Default Credentials.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVarP(&f.cfg.Platform, "platform", "p", "", "cloud-run, app-runner or lambda (required)")
	pf.StringVarP(&f.cfg.Name, "name", "n", "", "service name (required); resources are named {name}-{env}")
	pf.StringVarP(&f.cfg.Env, "env", "e", "dev", "environment")
	pf.StringVarP(&f.cfg.Region, "region", "r", "", "region (default: AWS configuration or us-east-1; us-central1 for Cloud Run)")
	pf.StringVar(&f.cfg.ProjectID, "project-id", "", "GCP project (Cloud Run)")
	pf.StringVarP(&f.output, "output", "o", "text", "text or json (json: one document on stdout, progress on stderr)")
	cmd.AddCommand(newDeployPlanCmd(f), newDeployUpCmd(f), newDeployLocalCmd(f), newDeployDownCmd(f), newDeployStatusCmd(f))
	return cmd
}

// buildFlags are shared by plan, up and local: they build the image and decide about secrets.
func buildFlags(cmd *cobra.Command, f *deployFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.Main, "main", ".", "main package of the controller to build (its main calls platform.Main)")
	if cmd.Name() == "local" {
		return
	}
	fl.StringVar(&f.cfg.Arch, "arch", "", "amd64 or arm64 (default: arm64 on Lambda, amd64 elsewhere)")
	fl.StringVar(&f.cfg.ImageRepo, "image-repo", "", "push to this repository prefix instead of the platform registry (like KO_DOCKER_REPO)")
	fl.BoolVar(&f.cfg.GenerateAPIKey, "generate-api-key", false, "generate SUPERVAIZER_API_KEY when its secret does not exist (shown once)")
	fl.BoolVar(&f.cfg.GeneratePrivateKey, "generate-private-key", false, "generate SUPERVAIZER_PRIVATE_KEY (RSA-2048) when its secret does not exist")
	fl.BoolVar(&f.cfg.RotateSecrets, "rotate-secrets", false, "replace existing secrets with new values (the new API key must be entered in Studio)")
	fl.IntVar(&f.cfg.MinInstances, "min-instances", 1, "instances kept warm (Cloud Run)")
	fl.StringVar(&f.cfg.Tracing, "tracing", deploy.TracingPassThrough, "passthrough or active: X-Ray active tracing of the function (Lambda)")
}

func newDeployPlanCmd(f *deployFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what up would create, update or leave alone (changes nothing)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, "plan", func(ctx context.Context, d *deploy.Deployer) (any, error) {
				res, err := d.Plan(ctx)
				return resultDoc(res), err
			})
		},
	}
	buildFlags(cmd, f)
	return cmd
}

func newDeployUpCmd(f *deployFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Build, plan, confirm, then push, store secrets, deploy and check the controller",
		Long: `up builds the image and plans like plan. When the plan changes something it lists the changes and
asks for confirmation on a terminal; without a terminal, or with --output json, pass --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, "up", func(ctx context.Context, d *deploy.Deployer) (any, error) {
				res, err := d.Up(ctx)
				return resultDoc(res), err
			})
		},
	}
	buildFlags(cmd, f)
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "apply without asking (required without a terminal, and with --output json)")
	return cmd
}

func newDeployLocalCmd(f *deployFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Build the image and run it on this machine the way the platform would, then check its health",
		Long: `local is a dry run of up without a cloud: it builds the same image (for this machine's architecture),
runs its binary here the way the platform runs it (Lambda: as the bootstrap under the Lambda Runtime
Interface Emulator, behind a local Function URL; Cloud Run and App Runner: as the container's
process, with the environment the platform gives it), and runs the health gate against it. Secrets
come from this host (SUPERVAIZER_API_KEY, SUPERVAIZER_PRIVATE_KEY...) or are made for this run
only; nothing is pushed, stored or contacted. With --serve the controller keeps running after the
gate, until Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, "local", func(ctx context.Context, d *deploy.Deployer) (any, error) {
				if f.cfg.Serve && f.output == "text" {
					d.Logs = cmd.ErrOrStderr()
				}
				res, err := d.Local(ctx)
				return resultDoc(res), err
			})
		},
	}
	buildFlags(cmd, f)
	cmd.Flags().BoolVar(&f.cfg.Serve, "serve", false, "keep the controller running after the health gate, until interrupted")
	cmd.Flags().StringVar(&f.rie, "rie", "", "path of aws-lambda-rie (Lambda; default: on PATH or in the Go bin directory)")
	return cmd
}

func newDeployDownCmd(f *deployFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Delete the service (and with --purge its secrets and stored data)",
		Long: `down deletes what svz deploy created for the service; resources of the same names that svz did not
create are kept. It asks for confirmation on a terminal; without a terminal, or with --output json,
pass --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, "down", func(ctx context.Context, d *deploy.Deployer) (any, error) {
				res, err := d.Down(ctx)
				return resultDoc(res), err
			})
		},
	}
	cmd.Flags().BoolVar(&f.cfg.Purge, "purge", false, "also delete the secrets and the store table (the API key must then be re-entered in Studio)")
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "delete without asking (required without a terminal, and with --output json)")
	return cmd
}

func newDeployStatusCmd(f *deployFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Report URL, image digest, secret presence and health (non-zero exit when not healthy)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, "status", func(ctx context.Context, d *deploy.Deployer) (any, error) {
				st, err := d.Status(ctx)
				return st, err
			})
		},
	}
}

// confirmer is how up and down ask: nil with --yes; an error when nobody can be asked (stdin is
// not a terminal, or stdout carries the JSON document), which names what needs confirming and --yes.
func confirmer(cmd *cobra.Command, f *deployFlags, what string) (func(context.Context, string, []deploy.Change) error, error) {
	if f.yes {
		return nil, nil
	}
	if f.output == "json" {
		return nil, fmt.Errorf("%s needs confirmation: pass --yes (with --output json nobody is asked)", what)
	}
	file, ok := cmd.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(file.Fd())) {
		return nil, fmt.Errorf("%s needs confirmation: pass --yes (stdin is not a terminal, so nobody can be asked)", what)
	}
	return func(ctx context.Context, question string, changes []deploy.Change) error {
		w := cmd.ErrOrStderr()
		for _, c := range changes {
			if c.Action != deploy.NoOp {
				fmt.Fprintln(w, "  "+c.String())
			}
		}
		fmt.Fprintf(w, "%s [y/N] ", question)
		answer := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(file).ReadString('\n')
			answer <- line
		}()
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return fmt.Errorf("cancelled: %w", ctx.Err())
		case a := <-answer:
			if a := strings.ToLower(strings.TrimSpace(a)); a != "y" && a != "yes" {
				return errors.New("cancelled: not confirmed")
			}
			return nil
		}
	}, nil
}

// confirmation names what up or down would do, for the question and for the refusal.
func confirmation(name string, cfg *deploy.Config) string {
	target := cfg.ResourceName() + " on " + cfg.Platform
	switch {
	case name == "down" && cfg.Purge:
		return "deleting " + target + " with its secrets and stored data"
	case name == "down":
		return "deleting " + target
	case cfg.RotateSecrets:
		return "changing " + target + " and rotating its secrets"
	}
	return "changing " + target
}

// run checks the request, settles how to confirm, opens the platform, runs one command and
// prints its outcome. What can be refused without the cloud (the configuration, --main, a
// confirmation nobody can give) is refused before connecting. The error names the failed step.
func run(cmd *cobra.Command, f *deployFlags, name string, do func(context.Context, *deploy.Deployer) (any, error)) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	ctx := cmd.Context()
	if cwd, err := os.Getwd(); err == nil {
		f.cfg.Dir = cwd
	}
	d := &deploy.Deployer{
		Config:   f.cfg,
		Getenv:   os.Getenv,
		Environ:  os.Environ(),
		Progress: progressPrinter(cmd.ErrOrStderr()),
	}
	if err := d.Preflight(ctx, name); err != nil {
		return report(cmd, f, name, nil, err)
	}
	if name == "up" || name == "down" {
		what := confirmation(name, &f.cfg)
		ask, err := confirmer(cmd, f, what)
		if err != nil {
			return report(cmd, f, name, nil, &deploy.StepError{Step: deploy.StepConfirm, Err: err})
		}
		d.Confirm = ask
		if name == "down" && ask != nil {
			q := "Delete " + strings.TrimPrefix(what, "deleting ") + "?"
			if err := ask(ctx, q, nil); err != nil {
				return report(cmd, f, name, nil, &deploy.StepError{Step: deploy.StepConfirm, Err: err})
			}
		}
	}
	var p deploy.Platform
	closer := func() {}
	if name == "local" {
		p = localPlatform(&f.cfg, f.rie)
	} else {
		var err error
		if p, closer, err = openPlatform(ctx, &f.cfg); err != nil {
			return report(cmd, f, name, nil, &deploy.StepError{Step: "connect", Err: err})
		}
	}
	defer closer()
	d.Platform = p
	d.Config.Region = f.cfg.Region
	doc, err := do(ctx, d)
	return report(cmd, f, name, doc, err)
}

// localPlatform is the platform of svz deploy local: nothing to connect to.
func localPlatform(cfg *deploy.Config, emulator string) deploy.Platform {
	switch cfg.Platform {
	case deploy.PlatformLambda:
		return lambda.LocalPlatform(emulator, cfg.Region)
	case deploy.PlatformAppRunner:
		return apprunner.LocalPlatform(cfg.Region)
	}
	return cloudrun.LocalPlatform(cfg.Region)
}

// openPlatform connects to the chosen cloud with its default credentials.
func openPlatform(ctx context.Context, cfg *deploy.Config) (deploy.Platform, func(), error) {
	switch cfg.Platform {
	case deploy.PlatformLambda, deploy.PlatformAppRunner:
		awsCfg, err := awsdeploy.LoadConfig(ctx, cfg.Region)
		if err != nil {
			return deploy.Platform{}, nil, err
		}
		cfg.Region = awsCfg.Region
		var p deploy.Platform
		if cfg.Platform == deploy.PlatformLambda {
			p, err = lambda.NewPlatform(ctx, awsCfg)
		} else {
			p, err = apprunner.NewPlatform(ctx, awsCfg)
		}
		return p, func() {}, err
	case deploy.PlatformCloudRun:
		if cfg.Region == "" {
			cfg.Region = cloudrun.DefaultRegion
		}
		if err := cloudrun.CheckCredentials(ctx); err != nil {
			return deploy.Platform{}, nil, err
		}
		clients, err := cloudrun.NewClients(ctx)
		if err != nil {
			return deploy.Platform{}, nil, err
		}
		return clients.Platform(cfg.ProjectID, cfg.Region, adcToken), func() { _ = clients.Close() }, nil
	}
	return deploy.Platform{}, nil, fmt.Errorf("unknown platform %q", cfg.Platform)
}

// adcToken returns an access token of Application Default Credentials, for Google Cloud's APIs.
func adcToken(ctx context.Context) (string, error) {
	ts, err := google.DefaultTokenSource(ctx, cloudrun.Scope)
	if err != nil {
		return "", fmt.Errorf("application default credentials: %w", err)
	}
	t, err := ts.Token()
	if err != nil {
		return "", fmt.Errorf("application default credentials: %w", err)
	}
	return t.AccessToken, nil
}

// resultDoc is the JSON document of plan, up and down. The API key appears only when generated by
// this run (it must be entered in Studio and is never shown again).
type resultDocument struct {
	deploy.Result
	APIKey string `json:"api_key,omitempty"`
}

func resultDoc(r deploy.Result) resultDocument {
	return resultDocument{Result: r, APIKey: r.NewAPIKey.Reveal()}
}

// report prints the outcome (text or JSON on stdout) and returns the error to exit non-zero with.
func report(cmd *cobra.Command, f *deployFlags, name string, doc any, err error) error {
	out := cmd.OutOrStdout()
	if f.output == "json" {
		v := map[string]any{"ok": err == nil, "command": name}
		if doc != nil {
			v["result"] = doc
		}
		if err != nil {
			v["error"] = err.Error()
			v["failed_step"] = deploy.FailedStep(err)
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if encErr := enc.Encode(v); encErr != nil {
			return errors.Join(err, encErr)
		}
	} else if doc != nil {
		printText(out, doc)
	}
	if err == nil {
		return nil
	}
	if step := deploy.FailedStep(err); step != "" {
		var se *deploy.StepError
		errors.As(err, &se)
		return fmt.Errorf("deploy %s failed at step %q: %w", name, step, se.Err)
	}
	return fmt.Errorf("deploy %s: %w", name, err)
}

func printText(w io.Writer, doc any) {
	switch d := doc.(type) {
	case resultDocument:
		for _, c := range d.Changes {
			fmt.Fprintln(w, c.String())
		}
		if d.Image != "" {
			fmt.Fprintln(w, "image:", d.Image)
		}
		if d.URL != "" {
			fmt.Fprintln(w, "url:  ", d.URL)
		}
		if d.RolledBack {
			fmt.Fprintln(w, "rolled back to the previous version")
		}
		if d.Studio != nil {
			fmt.Fprintf(w, "studio: workspace %s, audience %s, agents %v (configuration updated: %v)\n",
				d.Studio.Workspace, d.Studio.Audience, d.Studio.AgentIDs, d.Studio.Changed)
		}
		if d.APIKey != "" {
			fmt.Fprintln(w, "API key (shown once; enter it in Studio):", d.APIKey)
		}
	case deploy.Status:
		fmt.Fprintf(w, "service:  %s on %s\n", d.Service, d.Platform)
		if d.Live != nil {
			fmt.Fprintf(w, "url:      %s\nimage:    %s\nrevision: %s\n", d.Live.URL, d.Live.Image, d.Live.Revision)
		} else {
			fmt.Fprintln(w, "deployed: no")
		}
		for _, s := range d.Secrets {
			state := "absent"
			if s.Present {
				state = fmt.Sprintf("present (version %s, fingerprint %s)", s.Version, s.Fingerprint)
			}
			fmt.Fprintf(w, "secret:   %s %s\n", s.Name, state)
		}
		fmt.Fprintln(w, "health:  ", d.Health)
	}
}

// progressPrinter writes one line per step event.
func progressPrinter(w io.Writer) func(deploy.Event) {
	return func(e deploy.Event) {
		switch e.State {
		case deploy.StateStart:
			fmt.Fprintf(w, "→ %s: %s\n", e.Step, e.Message)
		case deploy.StateDone:
			fmt.Fprintf(w, "✓ %s (%.1fs) %s\n", e.Step, e.Elapsed.Seconds(), e.Message)
		case deploy.StateFailed:
			fmt.Fprintf(w, "✗ %s (%.1fs) %s\n", e.Step, e.Elapsed.Seconds(), e.Message)
		case deploy.StateNote:
			fmt.Fprintf(w, "! %s\n", e.Message)
		}
	}
}
