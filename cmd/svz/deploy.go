package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2/google"

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
}

// newDeployCmd is `svz deploy plan|up|down|status`.
func newDeployCmd() *cobra.Command {
	f := &deployFlags{}
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Build, deploy and check a controller on Cloud Run, App Runner or Lambda",
		Long: `Build the controller's main package into a daemonless OCI image, push it, keep its secrets in the
platform's secret manager, create or update the service, and gate the result on a health check that
uses the stored API key (rolling back on failure).

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
	cmd.AddCommand(newDeployPlanCmd(f), newDeployUpCmd(f), newDeployDownCmd(f), newDeployStatusCmd(f))
	return cmd
}

// buildFlags are shared by plan and up: both build the image and decide about secrets.
func buildFlags(cmd *cobra.Command, f *deployFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.Main, "main", ".", "main package of the controller to build")
	fl.StringVar(&f.cfg.Arch, "arch", "", "amd64 or arm64 (default: arm64 on Lambda, amd64 elsewhere)")
	fl.StringVar(&f.cfg.ImageRepo, "image-repo", "", "push to this repository prefix instead of the platform registry (like KO_DOCKER_REPO)")
	fl.BoolVar(&f.cfg.GenerateAPIKey, "generate-api-key", false, "generate SUPERVAIZER_API_KEY when its secret does not exist (shown once)")
	fl.BoolVar(&f.cfg.GeneratePrivateKey, "generate-private-key", false, "generate SUPERVAIZER_PRIVATE_KEY (RSA-2048) when its secret does not exist")
	fl.BoolVar(&f.cfg.RotateSecrets, "rotate-secrets", false, "replace existing secrets with new values (the new API key must be entered in Studio)")
	fl.IntVar(&f.cfg.MinInstances, "min-instances", 1, "instances kept warm (Cloud Run)")
}

func newDeployPlanCmd(f *deployFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what up would create, update or leave alone (changes nothing)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, "plan", "", func(ctx context.Context, d *deploy.Deployer) (any, error) {
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
		Short: "Build, push, store secrets, deploy and check the controller",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			question := ""
			if f.cfg.RotateSecrets {
				question = "Rotate the secrets of " + f.cfg.ResourceName() + "? Studio must then be given the new API key."
			}
			return run(cmd, f, "up", question, func(ctx context.Context, d *deploy.Deployer) (any, error) {
				res, err := d.Up(ctx)
				return resultDoc(res), err
			})
		},
	}
	buildFlags(cmd, f)
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func newDeployDownCmd(f *deployFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Delete the service (and with --purge its secrets and stored data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			what := "Delete " + f.cfg.ResourceName() + " on " + f.cfg.Platform + "?"
			if f.cfg.Purge {
				what = "Delete " + f.cfg.ResourceName() + " on " + f.cfg.Platform + " with its secrets and stored data?"
			}
			return run(cmd, f, "down", what, func(ctx context.Context, d *deploy.Deployer) (any, error) {
				res, err := d.Down(ctx)
				return resultDoc(res), err
			})
		},
	}
	cmd.Flags().BoolVar(&f.cfg.Purge, "purge", false, "also delete the secrets and the store table (the API key must then be re-entered in Studio)")
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func newDeployStatusCmd(f *deployFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Report URL, image digest, secret presence and health (non-zero exit when not healthy)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, "status", "", func(ctx context.Context, d *deploy.Deployer) (any, error) {
				st, err := d.Status(ctx)
				return st, err
			})
		},
	}
}

// confirm asks on a terminal; elsewhere --yes is required.
func confirm(cmd *cobra.Command, f *deployFlags, question string) error {
	if f.yes {
		return nil
	}
	in := cmd.InOrStdin()
	if file, ok := in.(*os.File); !ok || !isTerminal(file) || f.output == "json" {
		return fmt.Errorf("%s pass --yes to confirm (no terminal to ask on)", question)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s [y/N] ", question)
	var answer string
	_, _ = fmt.Fscanln(in, &answer)
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return errors.New("cancelled")
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// run asks question (when not empty), opens the platform, runs one command and prints its outcome;
// a refusal is reported like any failure, at step "confirm". The error names the failed step.
func run(cmd *cobra.Command, f *deployFlags, name, question string, do func(context.Context, *deploy.Deployer) (any, error)) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	ctx := cmd.Context()
	if err := f.cfg.Validate(); err != nil {
		return report(cmd, f, name, nil, &deploy.StepError{Step: "config", Err: err})
	}
	if name == "plan" || name == "up" { // before connecting: the refusal needs no credentials
		if err := deploy.CheckStore(f.cfg.Platform, os.Getenv); err != nil {
			return report(cmd, f, name, nil, err)
		}
	}
	if question != "" {
		if err := confirm(cmd, f, question); err != nil {
			return report(cmd, f, name, nil, &deploy.StepError{Step: "confirm", Err: err})
		}
	}
	if cwd, err := os.Getwd(); err == nil {
		f.cfg.Dir = cwd
	}
	p, closer, err := openPlatform(ctx, &f.cfg)
	if err != nil {
		return report(cmd, f, name, nil, &deploy.StepError{Step: "connect", Err: err})
	}
	defer closer()
	d := &deploy.Deployer{
		Config:   f.cfg,
		Platform: p,
		Getenv:   os.Getenv,
		Environ:  os.Environ(),
		Progress: progressPrinter(cmd.ErrOrStderr()),
	}
	doc, err := do(ctx, d)
	return report(cmd, f, name, doc, err)
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
		clients, err := cloudrun.NewClients(ctx)
		if err != nil {
			return deploy.Platform{}, nil, err
		}
		token := func(ctx context.Context) (string, error) {
			ts, err := google.DefaultTokenSource(ctx, "https://www.googleapis.com/auth/cloud-platform")
			if err != nil {
				return "", fmt.Errorf("application default credentials: %w", err)
			}
			t, err := ts.Token()
			if err != nil {
				return "", fmt.Errorf("application default credentials: %w", err)
			}
			return t.AccessToken, nil
		}
		return clients.Platform(cfg.ProjectID, cfg.Region, token), func() { _ = clients.Close() }, nil
	}
	return deploy.Platform{}, nil, fmt.Errorf("unknown platform %q", cfg.Platform)
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
