// Package local runs a built controller image on this machine for `svz deploy local`: the image's
// binary, written out of its layers into a temporary directory, started as a process with exactly
// the environment a platform runner gives it (nothing of the caller's environment leaks in), and
// stopped as platforms stop it (SIGTERM, then SIGKILL).
package local

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/image"
)

// WriteBinary writes the image's entrypoint into a new temporary directory as name (executable)
// and returns the directory and the file's path. The caller removes the directory.
func WriteBinary(img v1.Image, name string) (dir, path string, err error) {
	b, err := image.Binary(img)
	if err != nil {
		return "", "", err
	}
	dir, err = os.MkdirTemp("", "svz-local-")
	if err != nil {
		return "", "", fmt.Errorf("temporary directory: %w", err)
	}
	path = filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("write the controller binary: %w", err)
	}
	return dir, path, nil
}

// FreePort returns a loopback port nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Environ flattens an environment, sorted by name: the image's own variables (PATH,
// SSL_CERT_FILE), then env over them.
func Environ(env map[string]string) []string {
	all := map[string]string{}
	for _, kv := range image.Env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				all[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	for k, v := range env {
		all[k] = v
	}
	out := make([]string, 0, len(all))
	for k, v := range all {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// SecretValues adds the secrets' values to env, as platforms that inject secrets as variables do.
func SecretValues(env map[string]string, secrets map[string]deploy.Secret) {
	for k, v := range secrets {
		env[k] = v.Reveal()
	}
}

// StartProcess runs the image's binary on port 127.0.0.1:port with exactly env, its output to
// logs, and returns the running instance; how describes it.
func StartProcess(img v1.Image, env map[string]string, port int, logs io.Writer, how string) (*deploy.LocalInstance, error) {
	dir, bin, err := WriteBinary(img, "controller")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env = Environ(env)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start the controller: %w", err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		exitErr = cmd.Wait()
		close(exited)
	}()
	var once sync.Once
	stop := func() error {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(10 * time.Second)
			defer t.Stop()
			select {
			case <-exited:
			case <-t.C:
				_ = cmd.Process.Kill()
				<-exited
			}
			os.RemoveAll(dir)
		})
		return nil
	}
	return &deploy.LocalInstance{
		URL: "http://127.0.0.1:" + strconv.Itoa(port), How: how,
		Exited: exited,
		ExitErr: func() error {
			select {
			case <-exited:
				if exitErr == nil {
					return fmt.Errorf("exit status 0")
				}
				return exitErr
			default:
				return nil
			}
		},
		Stop: stop,
	}, nil
}
