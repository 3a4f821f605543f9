// Package workbench is the local workbench: a browser UI served at /manage that shows each agent's
// registration as Studio sees it and drives its v2 surfaces and actions, the way Studio will.
//
// The page talks to the controller only through its public protocol (discovery, the Agent Card,
// the agent info route, POST /a2a and GET /a2a/events) with the controller's API key, so a call
// that works in the workbench works from Studio, and every call it makes can be copied as a curl
// command. The workbench itself adds a few small routes: the page's settings, a check of a
// registration the page fetched (package contract's validation, the rules the reference SDK
// applies), and the jobs page's operator controls over the background jobs (jobs.go), which need
// the API key.
//
// Local mode mounts it (adapters/platform, build tag !svz_nolocal), so it is never linked into
// the Lambda bootstrap. It serves loopback only, whatever listener it is given: a request from a
// non-loopback address, or naming a host that is not loopback (DNS rebinding), is refused with
// 403. Its assets are embedded (no Node toolchain, no CDN) and served under a strict
// Content-Security-Policy: scripts and styles from the workbench only, nothing inline.
package workbench

import (
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"github.com/supervaize/svz/adapters/internal/httpkit"
)

// Path is where the workbench is mounted.
const Path = "/manage"

// Routes under Path.
const (
	assetsPrefix = Path + "/assets/"
	configPath   = Path + "/api/config"
	validatePath = Path + "/api/validate"
)

// ContentSecurityPolicy is the policy of every workbench response: the page runs its own scripts
// and styles and nothing else (no inline code, no eval, no other origin), reaches only its own
// origin, and cannot be framed.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed assets
var assets embed.FS

// Authorization is how the controller authorizes /a2a calls, which the page must know to ask for
// a workspace token or not.
type Authorization string

const (
	// Bypassed: local mode's bypass, the API key alone is enough.
	Bypassed Authorization = "bypassed"
	// TokenRequired: trust settings are set, every call needs a workspace authorization token.
	TokenRequired Authorization = "token"
	// Refused: every call is refused (workspace_authorization_not_configured).
	Refused Authorization = "refused"
)

// Config is what the page is told about the controller.
type Config struct {
	// APIKey is handed to the page. Set it only when the key is public knowledge (local mode's
	// local-dev): a key the user chose is a secret, so leave APIKey empty and set KeyFingerprint;
	// the page then asks for the key and keeps it in the tab.
	APIKey string
	// KeyFingerprint names the key the page asks for (internal/fingerprint).
	KeyFingerprint string
	// Authorization says whether calls need a workspace token.
	Authorization Authorization
	// Log receives refusals (nil: slog.Default()).
	Log *slog.Logger
	// Jobs are the controller's background jobs, for the jobs page (nil: no agent defines work);
	// APIKeyCheck checks the key its routes need (KeyCheck).
	Jobs        Jobs
	APIKeyCheck func(key string) bool
}

// New returns next with the workbench mounted at Path: requests under Path are the workbench's,
// every other request goes to next.
func New(next http.Handler, cfg Config) http.Handler {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &handler{next: next, cfg: cfg}
}

var _ http.Handler = (*handler)(nil)

type handler struct {
	next http.Handler
	cfg  Config
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if path != Path && !strings.HasPrefix(path, Path+"/") {
		h.next.ServeHTTP(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	if reason := httpkit.NotLoopback(r); reason != "" {
		h.cfg.Log.Warn("workbench request refused", "remote_addr", r.RemoteAddr, "reason", reason)
		writeDetail(w, http.StatusForbidden, "The workbench answers loopback only: "+reason)
		return
	}
	switch {
	case path == Path || path == Path+"/":
		if !allow(w, r, http.MethodGet) {
			return
		}
		http.ServeFileFS(w, r, assets, "assets/index.html")
	case path == configPath:
		if allow(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, h.pageConfig())
		}
	case path == validatePath:
		if allow(w, r, http.MethodPost) {
			serveValidate(w, r)
		}
	case path == jobsPath || strings.HasPrefix(path, jobsPath+"/"):
		h.serveJobs(w, r)
	case strings.HasPrefix(path, assetsPrefix) && !strings.HasSuffix(path, "/index.html"):
		if !allow(w, r, http.MethodGet) {
			return
		}
		name := "assets/" + strings.TrimPrefix(path, assetsPrefix)
		if info, err := fs.Stat(assets, name); err != nil || info.IsDir() {
			writeDetail(w, http.StatusNotFound, "Not Found")
			return
		}
		http.ServeFileFS(w, r, assets, name)
	default:
		writeDetail(w, http.StatusNotFound, "Not Found")
	}
}

// pageConfig is what GET /manage/api/config answers.
type pageConfig struct {
	// APIKey is null when the key is a secret: the page asks for it.
	APIKey         *string       `json:"api_key"`
	KeyFingerprint string        `json:"api_key_fingerprint,omitempty"`
	Authorization  Authorization `json:"workspace_authorization"`
	// Jobs: the jobs page has jobs to show (an agent defines background work).
	Jobs bool `json:"jobs,omitempty"`
}

func (h *handler) pageConfig() pageConfig {
	c := pageConfig{Authorization: h.cfg.Authorization, Jobs: h.cfg.Jobs != nil}
	if h.cfg.APIKey != "" {
		c.APIKey = &h.cfg.APIKey
	} else {
		c.KeyFingerprint = h.cfg.KeyFingerprint
	}
	if c.Authorization == "" {
		c.Authorization = Bypassed
	}
	return c
}

// allow answers 405 unless r uses method (or HEAD for GET).
func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || method == http.MethodGet && r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", method)
	writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
	return false
}

// writeDetail answers the controller's error shape, {"detail": msg}.
func writeDetail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"detail": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"detail":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
