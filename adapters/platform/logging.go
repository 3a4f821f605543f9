package platform

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// newLogger returns the logger of the platform: JSON lines on Lambda and Cloud Run (with the
// severity and message keys Cloud Logging reads), text on a terminal, JSON otherwise. level is
// SUPERVAIZER_LOG_LEVEL (the reference SDK's names; INFO by default).
func newLogger(kind platformKind, level string, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	switch strings.ToUpper(level) {
	case "DEBUG":
		lvl = slog.LevelDebug
	case "", "INFO":
		lvl = slog.LevelInfo
	case "WARNING", "WARN":
		lvl = slog.LevelWarn
	case "ERROR", "CRITICAL":
		lvl = slog.LevelError
	default:
		return nil, fmt.Errorf("platform: SUPERVAIZER_LOG_LEVEL=%q: must be DEBUG, INFO, WARNING or ERROR", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch {
	case kind == onCloudRun:
		opts.ReplaceAttr = cloudLogging
	case kind == onHTTP && isTerminal(w):
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
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
