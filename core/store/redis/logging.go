package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// libraryLogger takes go-redis's own log lines (printf-style, to stderr by default, e.g.
// "redis: connection pool: failed to dial after 5 attempts") into a slog.Logger, at warning level,
// marked source=go-redis.
type libraryLogger struct{ log *slog.Logger }

func (l libraryLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(strings.TrimSpace(fmt.Sprintf(format, v...)), "redis: ")
	l.log.WarnContext(ctx, msg, "source", "go-redis")
}

// routeLibraryLogs sends go-redis's log lines to log. go-redis has one logger per process, so
// the last store opened chooses where they go.
func routeLibraryLogs(log *slog.Logger) { goredis.SetLogger(libraryLogger{log}) }
