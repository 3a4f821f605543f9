package platform

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/supervaize/svz/internal/envvar"
)

// newLogger returns the logger of the platform: JSON lines on Lambda and Cloud Run (with the
// severity and message keys Cloud Logging reads), text on a terminal, JSON otherwise, at the level
// SUPERVAIZER_LOG_LEVEL names (the reference SDK's names; INFO by default).
func newLogger(kind platformKind, getenv func(string) string, w io.Writer) (*slog.Logger, error) {
	level, err := envvar.Enum(getenv, "SUPERVAIZER_LOG_LEVEL", "INFO", "DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL")
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	lvl := map[string]slog.Level{
		"DEBUG": slog.LevelDebug, "INFO": slog.LevelInfo, "WARNING": slog.LevelWarn, "WARN": slog.LevelWarn,
		"ERROR": slog.LevelError, "CRITICAL": slog.LevelError,
	}[level]
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch {
	case kind == onCloudRun:
		opts.ReplaceAttr = cloudLogging
	case kind == onHTTP && isTerminal(w):
		h = slog.NewTextHandler(w, opts)
	}
	if h == nil {
		h = slog.NewJSONHandler(w, opts)
	}
	// Every record written with a context carries the trace and span ids of its call or delivery.
	return slog.New(traceHandler{Handler: h, kind: kind, project: strings.TrimSpace(getenv("GOOGLE_CLOUD_PROJECT"))}), nil
}

// cloudLogging renames the level and message keys to Cloud Logging's severity and message.
func cloudLogging(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		sev := "DEFAULT"
		switch lvl := a.Value.Any().(slog.Level); {
		case lvl >= slog.LevelError:
			sev = "ERROR"
		case lvl >= slog.LevelWarn:
			sev = "WARNING"
		case lvl >= slog.LevelInfo:
			sev = "INFO"
		default:
			sev = "DEBUG"
		}
		return slog.String("severity", sev)
	case slog.MessageKey:
		return slog.String("message", a.Value.String())
	}
	return a
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
