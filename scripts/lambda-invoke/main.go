// Command lambda-invoke runs a Lambda bootstrap once under the AWS Lambda Runtime Interface
// Emulator, without Docker, as `sam local invoke` does with Docker: the function's environment
// from a SAM --env-vars file (its ControllerFunction section), the variables Lambda and sam local
// set, one event from a file. It prints the function's response on stdout, what the emulator and
// the bootstrap print on stderr, and exits 1 when the invocation fails. `make invoke EVENT=…`
// builds the bootstrap and runs it (mk/lambda.mk).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/supervaize/svz/deploy/rie"
)

// function is the template's logical id of the controller: the section of the --env-vars file.
const function = "ControllerFunction"

func main() {
	var emulator, bootstrap, envVars, event string
	flag.StringVar(&emulator, "rie", "", "path of aws-lambda-rie (default: on PATH or in the Go bin directory)")
	flag.StringVar(&bootstrap, "bootstrap", "", "the bootstrap to run (required)")
	flag.StringVar(&envVars, "env-vars", "events/env.json", "SAM environment file: its "+function+" section is the function's environment")
	flag.StringVar(&event, "event", "", "the event to invoke with, a JSON file (required)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, emulator, bootstrap, envVars, event)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lambda-invoke:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, emulator, bootstrap, envVars, event string) error {
	if bootstrap == "" || event == "" {
		return errors.New("-bootstrap and -event are required, e.g. make invoke EVENT=events/function-url-health.json")
	}
	payload, err := os.ReadFile(event)
	if err != nil {
		return fmt.Errorf("event: %w", err)
	}
	if !json.Valid(payload) {
		return fmt.Errorf("event %s is not JSON", event)
	}
	env, err := environment(envVars)
	if err != nil {
		return err
	}
	path, err := rie.Find(emulator)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(bootstrap)
	if err != nil {
		return err
	}
	emu, err := rie.Start(ctx, rie.Options{RIE: path, Bootstrap: abs, Env: env, Dir: filepath.Dir(abs), Output: os.Stderr})
	if err != nil {
		return err
	}
	defer emu.Stop()
	inv, err := emu.Invoke(ctx, payload)
	if err != nil {
		return err
	}
	if _, err := os.Stdout.Write(append(inv.Payload, '\n')); err != nil {
		return err
	}
	if inv.Status != 200 {
		return fmt.Errorf("the invocation failed (emulator status %d)", inv.Status)
	}
	return nil
}

// environment is the function's environment: what Lambda sets, what sam local adds
// (AWS_SAM_LOCAL=true, which also lets the controller run in local mode on an emulated Lambda),
// then the file's section over it.
func environment(file string) ([]string, error) {
	vars := map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":        function,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256", // template.yaml's defaults
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     "30",
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_REGION":                      "us-east-1",
		"AWS_DEFAULT_REGION":              "us-east-1",
		"AWS_SAM_LOCAL":                   "true",
		"TZ":                              ":UTC",
		"PATH":                            "/usr/local/bin:/usr/bin:/bin",
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("env vars: %w", err)
		}
		var sections map[string]map[string]string
		if err := json.Unmarshal(b, &sections); err != nil {
			return nil, fmt.Errorf("env vars %s: want {\"%s\": {\"NAME\": \"value\"}}: %w", file, function, err)
		}
		section, ok := sections[function]
		if !ok {
			return nil, fmt.Errorf("env vars %s has no %s section", file, function)
		}
		for k, v := range section {
			vars[k] = v
		}
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env, nil
}
