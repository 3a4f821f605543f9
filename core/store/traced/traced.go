// Package traced measures a store's requests: their latency per backend and operation
// (db.client.operation.duration) and, when asked (telemetry.Providers.StoreSpans), a client span
// per request. Wrap keeps every optional interface the project's backends implement
// (store.Lister, store.Log, store.UpdateAppender, store.Exclusive), so that code asking a store
// for one finds it as before; a store lacking one of the first three is returned unwrapped.
package traced

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/telemetry"
)

// full is what a wrapped store implements.
type full interface {
	store.Store
	store.Lister
	store.Log
	store.UpdateAppender
}

// Store is a store whose requests are measured.
type Store struct {
	inner    full
	backend  string
	tracer   trace.Tracer // nil: no spans
	duration telemetry.Histogram
}

var (
	_ full            = (*Store)(nil)
	_ store.Exclusive = (*Store)(nil)
)

// Wrap returns s measured as backend (bolt, dynamodb, postgres, redis, memory); s itself when p
// records nothing or s lacks an interface the wrapper must keep.
func Wrap(s store.Store, backend string, p telemetry.Providers) store.Store {
	f, ok := s.(full)
	if !ok || !p.Enabled() {
		return s
	}
	t := &Store{inner: f, backend: backend}
	if p.StoreSpans && p.Tracing() {
		t.tracer = p.Tracer()
	}
	t.duration = p.Histogram(telemetry.StoreDuration, "Duration of the controller's store requests.")
	return t
}

// Unwrap is the measured store.
func (s *Store) Unwrap() store.Store { return s.inner }

// op starts measuring operation; the returned function ends it with the request's error.
func (s *Store) op(ctx context.Context, operation string) (context.Context, func(error)) {
	began := time.Now()
	var span trace.Span
	if s.tracer != nil {
		ctx, span = s.tracer.Start(ctx, "store "+operation, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String(telemetry.DBSystem, s.backend), attribute.String(telemetry.DBOperation, operation)))
	}
	return ctx, func(err error) {
		errType := outcome(err)
		if span != nil {
			if errType != "" {
				span.SetAttributes(attribute.String(telemetry.ErrorType, errType))
				if errType == "other" {
					span.SetStatus(codes.Error, err.Error())
				}
			}
			span.End()
		}
		if s.duration.On() {
			attrs := []attribute.KeyValue{attribute.String(telemetry.DBSystem, s.backend), attribute.String(telemetry.DBOperation, operation)}
			if errType != "" {
				attrs = append(attrs, attribute.String(telemetry.ErrorType, errType))
			}
			s.duration.Record(ctx, time.Since(began).Seconds(), attrs...)
		}
	}
}

// outcome names a request's error for error.type: the store's answers that are part of its
// contract (not_found, exists, conflict) apart from failures (other); "" for success.
func outcome(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, store.ErrNotFound):
		return "not_found"
	case errors.Is(err, store.ErrExists):
		return "exists"
	case errors.Is(err, store.ErrConflict):
		return "conflict"
	}
	return "other"
}

func (s *Store) Get(ctx context.Context, key string) (r store.Record, err error) {
	ctx, done := s.op(ctx, "get")
	defer func() { done(err) }()
	return s.inner.Get(ctx, key)
}

func (s *Store) Create(ctx context.Context, key string, value []byte, expiresAt time.Time) (r store.Record, err error) {
	ctx, done := s.op(ctx, "create")
	defer func() { done(err) }()
	return s.inner.Create(ctx, key, value, expiresAt)
}

func (s *Store) Update(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time) (r store.Record, err error) {
	ctx, done := s.op(ctx, "update")
	defer func() { done(err) }()
	return s.inner.Update(ctx, key, version, value, expiresAt)
}

func (s *Store) Delete(ctx context.Context, key string, version uint64) (err error) {
	ctx, done := s.op(ctx, "delete")
	defer func() { done(err) }()
	return s.inner.Delete(ctx, key, version)
}

func (s *Store) List(ctx context.Context, prefix, after string, limit int) (p store.Page, err error) {
	ctx, done := s.op(ctx, "list")
	defer func() { done(err) }()
	return s.inner.List(ctx, prefix, after, limit)
}

func (s *Store) AppendLog(ctx context.Context, name string, data []byte, keep store.Retention) (p store.LogPosition, err error) {
	ctx, done := s.op(ctx, "append_log")
	defer func() { done(err) }()
	return s.inner.AppendLog(ctx, name, data, keep)
}

func (s *Store) ReadLog(ctx context.Context, name string, after uint64, limit int) (r store.LogRange, err error) {
	ctx, done := s.op(ctx, "read_log")
	defer func() { done(err) }()
	return s.inner.ReadLog(ctx, name, after, limit)
}

// WaitLog is not measured: it blocks until the log changes, for as long as a stream is open.
func (s *Store) WaitLog(ctx context.Context, name string, after uint64) error {
	return s.inner.WaitLog(ctx, name, after)
}

func (s *Store) UpdateAppend(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time,
	name string, data []byte, keep store.Retention) (r store.Record, err error) {
	ctx, done := s.op(ctx, "update_append")
	defer func() { done(err) }()
	return s.inner.UpdateAppend(ctx, key, version, value, expiresAt, name, data, keep)
}

// MaxValueSize is the measured store's.
func (s *Store) MaxValueSize() int { return s.inner.MaxValueSize() }

// Close closes the measured store.
func (s *Store) Close() error { return s.inner.Close() }

// Exclusive is the measured store's answer, false when it does not say.
func (s *Store) Exclusive() bool {
	ex, ok := s.inner.(store.Exclusive)
	return ok && ex.Exclusive()
}
