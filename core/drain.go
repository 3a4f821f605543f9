package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// DefaultCloseTimeout bounds how long Close waits for calls in flight.
const DefaultCloseTimeout = 10 * time.Second

// calls counts the requests in flight, so that closing waits for them before the store they use
// is closed. Its zero value is not usable: see newCalls.
type calls struct {
	mu      sync.Mutex
	n       int
	closing bool
	idle    chan struct{} // closed when closing and n is 0
}

func newCalls() *calls { return &calls{idle: make(chan struct{})} }

// enter counts a request in, or reports false once closing has begun.
func (c *calls) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.n++
	return true
}

func (c *calls) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.closing && c.n == 0 {
		close(c.idle)
	}
}

// drain refuses new requests and waits until none is in flight or ctx ends; it returns how many
// were still running then.
func (c *calls) drain(ctx context.Context) int {
	c.mu.Lock()
	if !c.closing {
		c.closing = true
		if c.n == 0 {
			close(c.idle)
		}
	}
	c.mu.Unlock()
	select {
	case <-c.idle:
		return 0
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// shuttingDown answers a request that arrives once Close has begun.
func shuttingDown(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	writeDetail(w, http.StatusServiceUnavailable, "Server is shutting down")
}

// Shutdown ends the effect streams (their clients reconnect elsewhere with Last-Event-ID),
// refuses new requests (503), waits for the calls in flight until ctx ends, then calls
// Config.OnClose (which closes the store the calls use). Calls still running when ctx ends are
// reported in the error; OnClose is called all the same. Only the first Close or Shutdown does
// this; later ones return its result.
func (c *Controller) Shutdown(ctx context.Context) error {
	c.closeOnce.Do(func() {
		close(c.closing)
		var errs []error
		if n := c.calls.drain(ctx); n > 0 {
			errs = append(errs, fmt.Errorf("%d call(s) still running when the controller closed: %w", n, ctx.Err()))
			c.log.Error("closing the controller with calls still running", "calls", n)
		}
		if c.jobs != nil {
			c.jobs.Close() // background deliveries end before the store they use closes
		}
		if c.cfg.OnClose != nil {
			if err := c.cfg.OnClose(); err != nil {
				errs = append(errs, err)
			}
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// Close is Shutdown bounded by DefaultCloseTimeout.
func (c *Controller) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCloseTimeout)
	defer cancel()
	return c.Shutdown(ctx)
}
