package core

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Tests that each kill a mutant a mutation sample left alive (issue 30) in the replay budget.
// No clock: a context already cancelled makes any wait fail at once, and a context that tells
// when Acquire reaches its wait is the signal that a waiter is parked.

// A request larger than the whole budget takes the whole budget, at once (a single event larger
// than the replay budget is still delivered); an exact fit too.
func TestByteBudgetAcquireCapsAtTheTotal(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	b := newByteBudget(100)
	if got, err := b.Acquire(cancelled, nil, 250); got != 100 || err != nil {
		t.Fatalf("Acquire(250) of a budget of 100: %d, %v; want 100 at once", got, err)
	}
	b.Release(100)
	if got, err := b.Acquire(cancelled, nil, 60); got != 60 || err != nil {
		t.Fatalf("Acquire(60): %d, %v", got, err)
	}
	if got, err := b.Acquire(cancelled, nil, 40); got != 40 || err != nil {
		t.Fatalf("Acquire(40) of the 40 left: %d, %v; want an exact fit at once", got, err)
	}
	if got, err := b.Acquire(cancelled, nil, 1); got != 0 || err == nil {
		t.Fatalf("Acquire(1) of a full budget: %d, %v; want the context's error", got, err)
	}
	if held, peak := b.usage(); held != 100 || peak != 100 {
		t.Fatalf("held %d, peak %d", held, peak)
	}
}

// TryAcquire takes an exact fit and refuses one byte more.
func TestByteBudgetTryAcquireExactFit(t *testing.T) {
	b := newByteBudget(100)
	if !b.TryAcquire(70) || b.TryAcquire(31) || !b.TryAcquire(30) || b.TryAcquire(1) {
		t.Fatal("TryAcquire must take 70, refuse 31, take the 30 left, refuse 1")
	}
	b.Release(0) // nothing to give back: no change
	if held, _ := b.usage(); held != 100 {
		t.Fatalf("held %d", held)
	}
}

// waitSignal is a context that tells when Acquire starts waiting on it (it asks for Done only
// once it found the bytes taken).
type waitSignal struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (w *waitSignal) Done() <-chan struct{} {
	w.once.Do(func() { close(w.waiting) })
	return w.Context.Done()
}

// A stream waiting for the budget is woken when another gives its bytes back (stream A holds
// the whole budget and ends; stream B, still connected, gets its page).
func TestByteBudgetReleaseWakesWaiters(t *testing.T) {
	b := newByteBudget(100)
	if got, _ := b.Acquire(context.Background(), nil, 100); got != 100 {
		t.Fatalf("A took %d", got)
	}
	ctx := &waitSignal{Context: context.Background(), waiting: make(chan struct{})}
	done := make(chan int64, 1)
	go func() {
		got, err := b.Acquire(ctx, nil, 50)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	<-ctx.waiting // B is parked
	b.Release(100)
	select {
	case got := <-done:
		if got != 50 {
			t.Fatalf("B took %d", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("B was never woken after A gave the budget back")
	}
	// A stop ends a wait.
	b2 := newByteBudget(10)
	b2.TryAcquire(10)
	stop := make(chan struct{})
	close(stop)
	if got, err := b2.Acquire(context.Background(), stop, 5); got != 0 || err != context.Canceled {
		t.Fatalf("Acquire after stop: %d, %v", got, err)
	}
}
