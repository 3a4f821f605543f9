package testkit

import (
	"log/slog"

	"github.com/supervaize/svz/internal/syncbuf"
)

// LogBuffer collects log output written concurrently by servers under test.
type LogBuffer = syncbuf.Buffer

// Logger returns a JSON logger writing to a new LogBuffer, at debug level.
func Logger() (*slog.Logger, *LogBuffer) {
	b := &LogBuffer{}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}
