package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/internal/devstudio"
)

// Defaults of svz dev studio.
const (
	devStudioAddr     = "127.0.0.1:8800"
	devControllerURL  = "http://127.0.0.1:8000"
	devControllerKey  = "dev-controller.key"
	devStudioURLHint  = "http://" + devStudioAddr
	devStudioMaxReply = 1 << 20
)

type devStudioFlags struct {
	addr, apiKey, handshake, params, context, controllerURL, keyFile string
	workspaces                                                       []string
	checkpoints                                                      map[string]string
}

// newDevStudioCmd is `svz dev studio`: the local Studio stand-in, and its token and events
// clients.
func newDevStudioCmd() *cobra.Command {
	f := &devStudioFlags{}
	cmd := &cobra.Command{
		Use:   "studio",
		Short: "Run a local stand-in for Supervaize Studio (development and tests only)",
		Long: `Serve, on a loopback address, a stand-in for the parts of Supervaize Studio a controller talks to,
and print the environment that connects a controller to it:

  POST /w/{ws}/api/v1/ctrl-events/              server.register answers the handshake (--handshake
                                                chooses one of its failures instead); other events
                                                are recorded
  GET  /w/{ws}/api/v1/agents/{id}, by-slug/{s}   agent lookup, parameters (--parameters) encrypted
                                                to the key the controller registered
  POST /w/{ws}/api/v1/context/open/, search/     context items from --context
  GET  /w/{ws}/api/v1/workspace-agent-grants/jwks/  the workspace's token signing key
  POST /api/v1/rule-checkpoints/                decisions per phase (--checkpoint before=allow,after=pause)
  POST /token                                   mints a workspace-grant token (svz dev studio token)
  GET  /events, /registrations                  what it received

It keeps everything in memory, mints tokens for anyone who can reach it, and is never part of a
deployed controller. It is not Studio: use it on this machine only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return devStudio(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", devStudioAddr, "loopback address to listen on (port 0 picks a free one)")
	fl.StringSliceVar(&f.workspaces, "workspace", []string{devstudio.DefaultWorkspace}, "workspace slugs served (repeat or comma-separate)")
	fl.StringVar(&f.apiKey, "api-key", devstudio.DefaultAPIKey, "the SUPERVAIZE_API_KEY accepted")
	fl.StringVar(&f.handshake, "handshake", devstudio.HandshakeValid, "answer to server.register: "+strings.Join(devstudio.HandshakeAnswers, ", "))
	fl.StringVar(&f.params, "parameters", "", `JSON file of parameter values: {"agent-slug": {"NAME": "value"}}`)
	fl.StringVar(&f.context, "context", "", `JSON file of context items: [{"ref", "title", "scope", "source_type", "version", "content"}]`)
	fl.StringToStringVar(&f.checkpoints, "checkpoint", nil, "rule-checkpoint decision per phase, e.g. before=allow,after=pause (default allow)")
	fl.StringVar(&f.controllerURL, "controller-url", devControllerURL, "URL the controller will serve on (SUPERVAIZER_PUBLIC_URL in the printed environment)")
	fl.StringVar(&f.keyFile, "controller-key", devControllerKey, "controller RSA key file named in the printed environment (svz dev rsakey writes it)")
	cmd.AddCommand(newDevStudioTokenCmd(), newDevStudioEventsCmd())
	return cmd
}

func devStudio(cmd *cobra.Command, f *devStudioFlags) error {
	cfg := devstudio.Config{Workspaces: f.workspaces, APIKey: f.apiKey, Handshake: f.handshake, Checkpoints: f.checkpoints,
		Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))}
	var err error
	if f.params != "" {
		if cfg.Parameters, err = devstudio.LoadParameters(f.params); err != nil {
			return fmt.Errorf("--parameters: %w", err)
		}
	}
	if f.context != "" {
		if cfg.Context, err = devstudio.LoadContext(f.context); err != nil {
			return fmt.Errorf("--context: %w", err)
		}
	}
	s, err := devstudio.Start(cmd.Context(), cfg, f.addr)
	if err != nil {
		return err
	}
	defer s.Close()
	block := s.EnvBlock("", f.controllerURL, f.keyFile)
	if f.apiKey != devstudio.DefaultAPIKey {
		// A key the user chose is not printed back.
		block = strings.ReplaceAll(block, "export SUPERVAIZE_API_KEY="+f.apiKey, "export SUPERVAIZE_API_KEY=... # the --api-key you gave")
	}
	if _, err := io.WriteString(cmd.OutOrStdout(), block); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "svz dev studio: serving %s until interrupted (Ctrl-C)\n", s.URL())
	<-cmd.Context().Done()
	return nil
}

// devStudioURL is the stand-in to talk to: --studio, else SUPERVAIZE_API_URL, else the default.
func devStudioURL(flag string) string {
	for _, v := range []string{flag, os.Getenv("SUPERVAIZE_API_URL"), devStudioURLHint} {
		if v = strings.TrimRight(strings.TrimSpace(v), "/"); v != "" {
			return v
		}
	}
	return devStudioURLHint
}

func newDevStudioTokenCmd() *cobra.Command {
	var url, output string
	req := devstudio.TokenRequest{}
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token --agent SLUG --scopes SCOPE,...",
		Short: "Ask the running stand-in for a workspace-grant token and print it",
		Long: `Mint a workspace-grant token with svz dev studio (POST /token) for an agent of a controller registered
with it, and print it, ready for
  curl -H "X-Supervaize-Workspace-Authorization: Bearer $(svz dev studio token --agent ... --scopes ...)"

A call needs two scopes, its method and its target, e.g. supervaizer/action.invoke,job.start.
The call's workspace.id must be the token's workspace_id: "ws-" + the workspace slug.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.Workspace == "" {
				req.Workspace = strings.TrimSpace(os.Getenv("SUPERVAIZE_WORKSPACE_ID"))
			}
			if req.Workspace == "" {
				req.Workspace = devstudio.DefaultWorkspace
			}
			if req.Agent == "" || len(req.Scopes) == 0 {
				return errors.New("--agent and --scopes are required")
			}
			req.TTLSeconds = int(ttl / time.Second)
			body, _ := json.Marshal(req)
			var tok devstudio.Token
			if err := devStudioCall(cmd, http.MethodPost, devStudioURL(url)+"/token", body, &tok); err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(tok)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), tok.Token)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&url, "studio", "", "the stand-in's URL (default $SUPERVAIZE_API_URL, else "+devStudioURLHint+")")
	fl.StringVar(&req.Workspace, "workspace", "", "workspace slug (default $SUPERVAIZE_WORKSPACE_ID, else "+devstudio.DefaultWorkspace+")")
	fl.StringVar(&req.Agent, "agent", "", "agent slug (required)")
	fl.StringSliceVar(&req.Scopes, "scopes", nil, "granted scopes, comma-separated (required)")
	fl.DurationVar(&ttl, "ttl", devstudio.DefaultTokenTTL, "lifetime")
	fl.StringVar(&req.AgentWorkspaceRef, "agent-workspace-ref", "", "agent_workspace_ref claim (optional)")
	fl.StringVarP(&output, "output", "o", "text", "text (the token) or json (token and claims)")
	return cmd
}

func newDevStudioEventsCmd() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print what the running stand-in received (controller events, rule checkpoints)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var doc json.RawMessage
			if err := devStudioCall(cmd, http.MethodGet, devStudioURL(url)+"/events", nil, &doc); err != nil {
				return err
			}
			var out bytes.Buffer
			if err := json.Indent(&out, doc, "", "  "); err != nil {
				return err
			}
			out.WriteByte('\n')
			_, err := out.WriteTo(cmd.OutOrStdout())
			return err
		},
	}
	cmd.Flags().StringVar(&url, "studio", "", "the stand-in's URL (default $SUPERVAIZE_API_URL, else "+devStudioURLHint+")")
	return cmd
}

// devStudioCall sends one request to the stand-in and decodes its JSON answer into v.
func devStudioCall(cmd *cobra.Command, method, url string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(cmd.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("svz dev studio at %s: %w (is it running?)", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, devStudioMaxReply))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var d struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(b, &d)
		return fmt.Errorf("svz dev studio: %s %s: HTTP %d: %s", method, url, resp.StatusCode, d.Detail)
	}
	return json.Unmarshal(b, v)
}

func newDevRSAKeyCmd() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "rsakey",
		Short: "Write an RSA-2048 private key (PKCS#8 PEM, mode 0600) for SUPERVAIZER_PRIVATE_KEY",
		Long: `Write a new RSA-2048 private key in PKCS#8 PEM, as the reference SDK generates it: the controller's
key, whose public half it registers with Studio and to which Studio encrypts the agents'
parameters. The file is written with mode 0600 and never printed; an existing file is kept
unless --force is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !force {
				if _, err := os.Lstat(out); err == nil {
					return fmt.Errorf("%s already exists (use --force to replace it)", out)
				} else if !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			k, err := deploy.GeneratePrivateKey()
			if err != nil {
				return err
			}
			if err := writeAtomic(out, []byte(k.Reveal()), 0o600, force); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "# RSA key written to %s (fingerprint %s). Use it with:\nexport SUPERVAIZER_PRIVATE_KEY=\"$(cat %s)\"\n",
				out, k.Fingerprint(), shellPath(out))
			return err
		},
	}
	cmd.Flags().StringVar(&out, "out", devControllerKey, "file to write")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing file")
	return cmd
}
