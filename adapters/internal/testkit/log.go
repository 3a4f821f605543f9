package testkit

import (
	"bytes"
	"log/slog"
	"sync"
)

// LogBuffer collects log output written concurrently by servers under test.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything logged so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a JSON logger writing to a new LogBuffer, at debug level.
func Logger() (*slog.Logger, *LogBuffer) {
	b := &LogBuffer{}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}
