// Package jobstest helps tests of background work: a queue that keeps the messages dispatched to
// it, for the test to deliver when it chooses.
package jobstest

import (
	"context"
	"sync"
	"time"

	"github.com/supervaize/svz/core/jobs"
)

// Queue is a jobs.Dispatcher that keeps the messages (delays are ignored). Its zero value is ready.
type Queue struct {
	mu   sync.Mutex
	msgs []jobs.Message
}

var _ jobs.Dispatcher = (*Queue)(nil)

// Dispatch implements jobs.Dispatcher.
func (q *Queue) Dispatch(_ context.Context, m jobs.Message, _ time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, m)
	return nil
}

// Take returns the messages dispatched since the last Take, oldest first.
func (q *Queue) Take() []jobs.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.msgs
	q.msgs = nil
	return out
}
