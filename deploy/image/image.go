// Package image builds the controller image without a Docker daemon and pushes it.
//
// The image is a single-platform OCI manifest (Lambda rejects image indexes) on an empty base: a
// static Go binary at /svz/controller as the entrypoint, CA certificates, /etc/passwd and /etc/group
// with a non-root user (65532), and a world-writable /tmp. Every timestamp is fixed (SOURCE_DATE_EPOCH
// or the Unix epoch), tar entries are sorted with fixed owners and modes, so the same binary and CA
// bundle always give the same digest: a redeploy of unchanged code is recognised as a no-op.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and identity inside the image.
const (
	Entrypoint = "/svz/controller"
	CAFile     = "/etc/ssl/certs/ca-certificates.crt"
	UID        = 65532
	User       = "65532:65532"
)

// Env is the image's environment.
var Env = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"SSL_CERT_FILE=" + CAFile,
}

// systemCAFiles are where common systems keep their CA bundle (Debian/Alpine, Fedora/RHEL, macOS).
var systemCAFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
}

// SystemCACerts reads the host's CA bundle.
func SystemCACerts() ([]byte, error) {
	for _, f := range systemCAFiles {
		b, err := os.ReadFile(f)
		if err == nil && len(b) > 0 {
			return b, nil
		}
	}
	return nil, fmt.Errorf("no CA certificate bundle found (looked in %s)", strings.Join(systemCAFiles, ", "))
}

// Created returns the fixed image time: SOURCE_DATE_EPOCH when set (as reproducible-builds.org
// defines it), otherwise the Unix epoch.
func Created(getenv func(string) string) (time.Time, error) {
	s := strings.TrimSpace(getenv("SOURCE_DATE_EPOCH"))
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want a non-negative integer of seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// Spec describes the image around a binary.
type Spec struct {
	Binary  []byte    // static linux executable
	Arch    string    // amd64 or arm64
	CACerts []byte    // PEM bundle
	Created time.Time // fixed timestamp of every entry and of the config
}

// New assembles the image. It does no I/O.
func New(s Spec) (v1.Image, error) {
	switch {
	case len(s.Binary) == 0:
		return nil, errors.New("image: empty binary")
	case s.Arch != "amd64" && s.Arch != "arm64":
		return nil, fmt.Errorf("image: architecture %q: want amd64 or arm64", s.Arch)
	case len(s.CACerts) == 0:
		return nil, errors.New("image: empty CA bundle")
	}
	base, err := layer(s.Created, []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(CAFile, "/"), mode: 0o644, data: s.CACerts},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: UID},
		{name: "tmp/", mode: 0o1777, dir: true},
	})
	if err != nil {
		return nil, err
	}
	app, err := layer(s.Created, []entry{
		{name: path.Dir(Entrypoint)[1:] + "/", mode: 0o755, dir: true},
		{name: Entrypoint[1:], mode: 0o755, data: s.Binary},
	})
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: s.Created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "svz: base files", Comment: "passwd, group, CA certificates"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "svz: controller binary"}},
	)
	if err != nil {
		return nil, fmt.Errorf("image: append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = "linux"
	cf.Architecture = s.Arch
	cf.Config = v1.Config{
		Entrypoint: []string{Entrypoint},
		User:       User,
		Env:        append([]string(nil), Env...),
		WorkingDir: "/home/nonroot",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: set config: %w", err)
	}
	return img, nil
}

type entry struct {
	name string
	mode int64
	dir  bool
	uid  int
	data []byte
}

// layer writes entries as a tar with fixed metadata, sorted by name.
func layer(mtime time.Time, entries []entry) (v1.Layer, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: tar %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("image: tar %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: tar: %w", err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return l, nil
}

// BuildSpec says how to compile the controller.
type BuildSpec struct {
	Main string   // package pattern, e.g. "." or "./cmd/agent"
	Dir  string   // working directory of the build ("" = current)
	Arch string   // amd64 or arm64
	Env  []string // base environment (os.Environ() in the CLI); GOOS/GOARCH/CGO_ENABLED are forced
}

// buildTags are the controller's build tags: lambda.norpc drops aws-lambda-go's legacy RPC mode,
// unused by provided.al2023 and images; svz_noawschain drops the AWS SDK's default credential
// chain (about 3 MB and its package initialisation at every cold start), which no deployed
// platform needs: Lambda gives static credentials, App Runner container credentials, and Cloud
// Run reaches no AWS service.
const buildTags = "lambda.norpc,svz_noawschain"

// BuildFlags are the go build flags of the controller binary: static, stripped, reproducible.
var BuildFlags = []string{"-trimpath", "-ldflags=-s -w -buildid=", "-tags=" + buildTags}

// buildEnv is the environment of go build and go list for the target of s.
func buildEnv(s BuildSpec) []string {
	return append(withoutKeys(s.Env, "GOOS", "GOARCH", "CGO_ENABLED"), "GOOS=linux", "GOARCH="+s.Arch, "CGO_ENABLED=0")
}

// Compile builds the main package as a static linux binary and returns its bytes.
func Compile(ctx context.Context, s BuildSpec) ([]byte, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("go build: the go command is not on PATH: %w", err)
	}
	tmp, err := os.MkdirTemp("", "svz-build-")
	if err != nil {
		return nil, fmt.Errorf("go build: %w", err)
	}
	defer os.RemoveAll(tmp)
	out := tmp + "/controller"
	main := s.Main
	if main == "" {
		main = "."
	}
	args := append([]string{"build", "-o", out}, BuildFlags...)
	args = append(args, main)
	cmd := exec.CommandContext(ctx, gobin, args...)
	cmd.Dir = s.Dir
	cmd.Env = buildEnv(s)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s for linux/%s: %w\n%s", main, s.Arch, err, strings.TrimSpace(stderr.String()))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("go build: read output: %w", err)
	}
	return b, nil
}

func withoutKeys(env []string, keys ...string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, k := range keys {
			if strings.HasPrefix(kv, k+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// Binary returns the entrypoint file of an image New made: the controller binary, as the platform
// runs it.
func Binary(img v1.Image) ([]byte, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("image layers: %w", err)
	}
	want := strings.TrimPrefix(Entrypoint, "/")
	for i := len(layers) - 1; i >= 0; i-- { // the last layer holding the file wins, as in a container
		b, found, err := fileInLayer(layers[i], want)
		if err != nil || found {
			return b, err
		}
	}
	return nil, fmt.Errorf("%s not found in the image", Entrypoint)
}

func fileInLayer(l v1.Layer, want string) ([]byte, bool, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, false, fmt.Errorf("image layer: %w", err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("image layer: %w", err)
		}
		if h.Name == want && h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, false, fmt.Errorf("image layer: %s: %w", want, err)
			}
			return b, true, nil
		}
	}
}

// Push uploads img to repo under tag and returns its digest reference, repo@sha256:…. Registries on
// loopback are reached over plain HTTP, like go-containerregistry does for local registries.
func Push(ctx context.Context, img v1.Image, repo, tag string, auth authn.Authenticator) (string, error) {
	ref, err := name.NewTag(repo + ":" + tag)
	if err != nil {
		return "", fmt.Errorf("push: image reference %s:%s: %w", repo, tag, err)
	}
	if auth == nil {
		auth = authn.Anonymous
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuth(auth)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("push: digest: %w", err)
	}
	return ref.Context().Name() + "@" + d.String(), nil
}

// Tag is the tag pushed with an image: the environment and the digest prefix, readable and unique.
func Tag(env string, d v1.Hash) string { return env + "-" + d.Hex[:12] }

// workMarker is the name of jobs.Define's instantiations in a Go binary's function table.
const workMarker = "github.com/supervaize/svz/core/jobs.Define["

// DefinesBackgroundWork reports whether a controller binary defines background work (package
// core/jobs): the linker keeps jobs.Define only when the program can call it, and its name stays
// in the function table that tracebacks read, even in a stripped binary. It reads the binary
// rather than running it, so it answers for any architecture.
func DefinesBackgroundWork(bin []byte) bool { return bytes.Contains(bin, []byte(workMarker)) }
