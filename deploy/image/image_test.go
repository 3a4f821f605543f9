package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/supervaize/svz/deploy/image"
	"github.com/supervaize/svz/internal/golden"
	"github.com/supervaize/svz/internal/testenv"
)

func spec() image.Spec {
	return image.Spec{Binary: []byte("\x7fELF fake controller"), Arch: "arm64", CACerts: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), Created: time.Unix(0, 0).UTC()}
}

// TestGolden pins the manifest and config byte for byte: the digest of the same inputs never drifts.
func TestGolden(t *testing.T) {
	img, err := image.New(spec())
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	c, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	golden.JSON(t, "manifest.json", m)
	golden.JSON(t, "config.json", c)
	d, _ := img.Digest()
	golden.Bytes(t, "digest.txt", []byte(d.String()+"\n"))
}

func TestReproducible(t *testing.T) {
	digest := func(s image.Spec) v1.Hash {
		img, err := image.New(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := digest(spec())
	if again := digest(spec()); again != base {
		t.Fatalf("same inputs, digests %s and %s", base, again)
	}
	for name, mod := range map[string]func(*image.Spec){
		"binary":  func(s *image.Spec) { s.Binary = append(s.Binary, '!') },
		"arch":    func(s *image.Spec) { s.Arch = "amd64" },
		"certs":   func(s *image.Spec) { s.CACerts = append(s.CACerts, '\n') },
		"created": func(s *image.Spec) { s.Created = time.Unix(1700000000, 0) },
	} {
		s := spec()
		mod(&s)
		if digest(s) == base {
			t.Errorf("changing the %s keeps the digest", name)
		}
	}
}

func TestContents(t *testing.T) {
	img, err := image.New(spec())
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" || cf.Config.User != "65532:65532" ||
		strings.Join(cf.Config.Entrypoint, " ") != "/svz/controller" || len(cf.Config.Cmd) != 0 {
		t.Fatalf("config %+v", cf)
	}
	type entry struct {
		mode     int64
		uid, gid int
		body     string
	}
	var names []string
	got := map[string]entry{}
	layers, _ := img.Layers()
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			names = append(names, h.Name)
			got[h.Name] = entry{h.Mode, h.Uid, h.Gid, string(b)}
			if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s: time %s owner names %q %q", h.Name, h.ModTime, h.Uname, h.Gname)
			}
		}
		rc.Close()
	}
	want := []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt", "home/", "home/nonroot/", "tmp/", "svz/", "svz/controller"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("entries %q, want %q", names, want)
	}
	if e := got["svz/controller"]; e.mode != 0o755 || e.uid != 0 || e.body != string(spec().Binary) {
		t.Errorf("controller %+v", e)
	}
	if e := got["home/nonroot/"]; e.uid != image.UID || e.gid != image.UID || e.mode != 0o700 {
		t.Errorf("home %+v", e)
	}
	if e := got["tmp/"]; e.mode != 0o1777 {
		t.Errorf("tmp %+v", e)
	}
	if !strings.Contains(got["etc/passwd"].body, "nonroot:x:65532:65532:") {
		t.Errorf("passwd %q", got["etc/passwd"].body)
	}
}

func TestNewRejects(t *testing.T) {
	for name, mod := range map[string]func(*image.Spec){
		"image: empty binary":                            func(s *image.Spec) { s.Binary = nil },
		`image: architecture "386": want amd64 or arm64`: func(s *image.Spec) { s.Arch = "386" },
		"image: empty CA bundle":                         func(s *image.Spec) { s.CACerts = nil },
	} {
		s := spec()
		mod(&s)
		if _, err := image.New(s); err == nil || err.Error() != name {
			t.Errorf("got %v, want %q", err, name)
		}
	}
}

func TestCreated(t *testing.T) {
	for v, want := range map[string]string{"": "1970-01-01T00:00:00Z", "1700000000": "2023-11-14T22:13:20Z", "-1": "error", "soon": "error"} {
		got, err := image.Created(func(string) string { return v })
		s := "error"
		if err == nil {
			s = got.Format(time.RFC3339)
		}
		if s != want {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %s, want %s", v, s, want)
		}
	}
}

// TestCompile builds a tiny main package twice: a static linux binary, byte-identical both times.
func TestCompile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/tiny\n\ngo 1.22\n")
	write("main.go", "package main\n\nfunc main() { println(\"hi\") }\n")
	build := func() []byte {
		b, err := image.Compile(context.Background(), image.BuildSpec{Dir: dir, Arch: "arm64", Env: os.Environ()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := build(), build()
	if !bytes.Equal(a, b) {
		t.Fatal("two builds of the same source differ")
	}
	f, err := elf.NewFile(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	if f.Machine != elf.EM_AARCH64 {
		t.Errorf("machine %s", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("dynamically linked")
		}
	}
	write("main.go", "package main\n\nfunc main() { undefined() }\n")
	_, err = image.Compile(context.Background(), image.BuildSpec{Dir: dir, Arch: "amd64", Env: os.Environ()})
	if err == nil || !strings.Contains(err.Error(), "go build . for linux/amd64") || !strings.Contains(err.Error(), "undefined: undefined") {
		t.Fatalf("compile error: %v", err)
	}
}

func push(t *testing.T, repo string) {
	img, err := image.New(spec())
	if err != nil {
		t.Fatal(err)
	}
	ref, err := image.Push(context.Background(), img, repo, image.Tag("dev", mustDigest(t, img)), authn.Anonymous)
	if err != nil {
		t.Fatal(err)
	}
	if want := repo + "@" + mustDigest(t, img).String(); ref != want {
		t.Fatalf("ref %s, want %s", ref, want)
	}
	for _, r := range []string{ref, repo + ":" + image.Tag("dev", mustDigest(t, img))} {
		n, err := name.ParseReference(r)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Get(n)
		if err != nil {
			t.Fatal(err)
		}
		if desc.Digest != mustDigest(t, img) || desc.MediaType != "application/vnd.oci.image.manifest.v1+json" {
			t.Fatalf("%s: %s %s", r, desc.Digest, desc.MediaType)
		}
	}
}

func mustDigest(t *testing.T, img v1.Image) v1.Hash {
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPushInProcess(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	push(t, strings.TrimPrefix(srv.URL, "http://")+"/svz/hello-dev")
}

func TestPushRealRegistry(t *testing.T) {
	push(t, testenv.Need(t, testenv.OCIRegistry)+"/svz-image-test/hello-dev")
}

func BenchmarkNew(b *testing.B) {
	s := spec()
	s.Binary = bytes.Repeat([]byte("0123456789abcdef"), 20<<20/16) // a 20 MiB controller
	b.SetBytes(int64(len(s.Binary)))
	for b.Loop() {
		img, err := image.New(s)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := img.Digest(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDefinesBackgroundWork compiles a controller that defines background work and one that links
// package core/jobs without defining any, stripped as svz builds them.
func TestDefinesBackgroundWork(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles two programs")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for main, want := range map[string]bool{"./deploy/image/testdata/work": true, "./deploy/image/testdata/nowork": false} {
		b, err := image.Compile(context.Background(), image.BuildSpec{Dir: root, Main: main, Arch: "amd64", Env: os.Environ()})
		if err != nil {
			t.Fatal(err)
		}
		if got := image.DefinesBackgroundWork(b); got != want {
			t.Errorf("%s: DefinesBackgroundWork = %v, want %v", main, got, want)
		}
	}
}
