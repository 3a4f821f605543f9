// Package state is where an agent keeps its own records (jobs, cases, business objects) so that
// they survive serverless instances: typed JSON records on the controller's store (the one
// SUPERVAIZER_STORE opened), namespaced per agent and per VERIFIED workspace.
//
// The controller puts the scope of each call in the handler's context: the store, the agent's
// slug and the workspace id of the verified workspace grant (never the request's workspace
// member, which a caller chooses). A handler can therefore only ever reach the records of the
// workspace that Studio's grant proves, and of its own agent:
//
//	jobs := state.Of[Job](ctx, "jobs")
//	err := jobs.Create(ctx, jobID, Job{Status: "active"})
//	job, err := jobs.Update(ctx, jobID, func(j *Job) error { j.Status = "completed"; return nil })
//	for rec, err := range jobs.All(ctx, "") { ... }
//
// Records never expire unless a write says so (ExpiresIn, ExpiresAt). Update is a
// compare-and-swap that re-reads and retries on conflict, so concurrent updates of one record
// from many instances never lose one. Listing is by id prefix, in pages, on stores that list
// (store.Lister). Errors match the store's (ErrNotFound, ErrExists, ErrTooLarge...) with
// errors.Is.
package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/supervaize/svz/core/store"
)

// Errors, matching the store's where they are the store's.
var (
	ErrNotFound = store.ErrNotFound // no record has the id
	ErrExists   = store.ErrExists   // Create found a record with the id
	ErrTooLarge = store.ErrTooLarge // the encoded record is larger than the store accepts
	ErrInvalid  = store.ErrInvalid  // an empty or too long name or id
	// ErrNoScope: the context carries no state scope (not a handler's context, a bootstrap call
	// without a verified workspace, or a controller without a store).
	ErrNoScope = errors.New("state: no state scope in this context")
	// ErrListUnsupported: the controller's store cannot list records by prefix.
	ErrListUnsupported = errors.New("state: the store cannot list records")
	// ErrContention: an update lost the compare-and-swap MaxAttempts times in a row.
	ErrContention = errors.New("state: too many concurrent updates of one record")
)

// MaxAttempts bounds the read-modify-write rounds of one Update.
const MaxAttempts = 100

// keyPrefix starts every state key, apart from the idempotency and effect-log keys.
const keyPrefix = "state/v1/"

type scopeKey struct{}

// scope is a store and a key prefix: keyPrefix + agent + "/w/" + workspace + "/" (or "/a/" for
// agent-wide records), each part escaped.
type scope struct {
	store  store.Store
	prefix string
}

// callScope is what a context carries: the store and the namespace (agent, workspace) of a call.
// The key prefix is computed when a collection is opened, not for every call.
type callScope struct {
	store            store.Store
	agent, workspace string
}

// NewContext returns ctx carrying the state scope of agentSlug and workspaceID on s. The
// controller calls it for every handler with the VERIFIED workspace id; call it yourself only in
// trusted code outside a request (a scheduled worker, a test). An empty workspaceID (a bootstrap
// call) gives a scope where only agent-wide collections (AgentOf) work.
func NewContext(ctx context.Context, s store.Store, agentSlug, workspaceID string) context.Context {
	return context.WithValue(ctx, scopeKey{}, &callScope{store: s, agent: agentSlug, workspace: workspaceID})
}

func fromContext(ctx context.Context, agentWide bool) (*scope, error) {
	cs, _ := ctx.Value(scopeKey{}).(*callScope)
	switch {
	case cs == nil:
		return nil, fmt.Errorf("%w: use the context the controller passes to the handler (or state.NewContext)", ErrNoScope)
	case cs.store == nil:
		return nil, fmt.Errorf("%w: the controller has no store (core.Config.Store; package config opens the one SUPERVAIZER_STORE names)", ErrNoScope)
	case cs.agent == "":
		return nil, fmt.Errorf("%w: no agent slug", ErrNoScope)
	}
	prefix := keyPrefix + escape(cs.agent) + "/"
	if agentWide {
		return &scope{store: cs.store, prefix: prefix + "a/"}, nil
	}
	if cs.workspace == "" {
		return nil, fmt.Errorf("%w: this call has no verified workspace (bootstrap calls such as workspace_binding.* run before a grant exists); use state.AgentOf for agent-wide records", ErrNoScope)
	}
	return &scope{store: cs.store, prefix: prefix + "w/" + escape(cs.workspace) + "/"}, nil
}

// Collection is a named set of records of type T (encoded as JSON) in one scope. Its methods
// report the scope's error when the context had none.
type Collection[T any] struct {
	sc     *scope
	err    error
	name   string
	prefix string // scope prefix + escaped name + "/"
}

// Of returns the collection name of the workspace of ctx (the verified workspace of the call).
func Of[T any](ctx context.Context, name string) Collection[T] {
	return collection[T](ctx, name, false)
}

// AgentOf returns the collection name shared by every workspace of the agent: for records that
// belong to no workspace (e.g. the agent-side records workspace_binding.create makes). Never put
// a workspace's data here: any workspace's calls can read it.
func AgentOf[T any](ctx context.Context, name string) Collection[T] {
	return collection[T](ctx, name, true)
}

func collection[T any](ctx context.Context, name string, agentWide bool) Collection[T] {
	sc, err := fromContext(ctx, agentWide)
	c := Collection[T]{sc: sc, err: err, name: name}
	if err == nil && name == "" {
		c.err = fmt.Errorf("%w: a collection needs a name", ErrInvalid)
	}
	if c.err == nil {
		c.prefix = sc.prefix + escape(name) + "/"
	}
	return c
}

// Record is a stored record: its id, value, version (new on every write) and expiry (the zero
// time when it never expires).
type Record[T any] struct {
	ID        string
	Value     T
	Version   uint64
	ExpiresAt time.Time
}

// WriteOption sets the expiry of a write.
type WriteOption func(*writeOptions)

type writeOptions struct {
	expiry *time.Time
	now    func() time.Time
}

// ExpiresIn makes the record expire d from now (time.Now).
func ExpiresIn(d time.Duration) WriteOption {
	return func(o *writeOptions) { t := o.now().Add(d); o.expiry = &t }
}

// ExpiresAt makes the record expire at t; store.Never (the zero time) makes it never expire.
func ExpiresAt(t time.Time) WriteOption { return func(o *writeOptions) { o.expiry = &t } }

func applyWrite(opts []WriteOption) writeOptions {
	o := writeOptions{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func (c Collection[T]) key(id string) (string, error) {
	if c.err != nil {
		return "", c.err
	}
	if id == "" {
		return "", fmt.Errorf("state: %s: %w: an id is required", c.name, ErrInvalid)
	}
	k := c.prefix + escape(id)
	if len(k) > store.MaxKeyLen {
		return "", fmt.Errorf("state: %s: %w: the id %.40q… makes a key of %d bytes, more than %d", c.name, ErrInvalid, id, len(k), store.MaxKeyLen)
	}
	return k, nil
}

func (c Collection[T]) encode(id string, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("state: encode %s/%s: %w", c.name, id, err)
	}
	if max := c.sc.store.MaxValueSize(); len(b) > max {
		return nil, c.tooLarge(id, len(b))
	}
	return b, nil
}

func (c Collection[T]) tooLarge(id string, n int) error {
	return fmt.Errorf("state: %s/%s is %d bytes encoded, more than this store accepts (%d bytes): keep large content out of the record (an artifact, a file) or split it: %w",
		c.name, id, n, c.sc.store.MaxValueSize(), ErrTooLarge)
}

// writeErr names the record in a store error, with the size for ErrTooLarge.
func (c Collection[T]) writeErr(op, id string, n int, err error) error {
	if errors.Is(err, store.ErrTooLarge) {
		return c.tooLarge(id, n)
	}
	return fmt.Errorf("state: %s %s/%s: %w", op, c.name, id, err)
}

func (c Collection[T]) decode(id string, r store.Record) (Record[T], error) {
	out := Record[T]{ID: id, Version: r.Version, ExpiresAt: r.ExpiresAt}
	if err := json.Unmarshal(r.Value, &out.Value); err != nil {
		return Record[T]{}, fmt.Errorf("state: decode %s/%s: %w", c.name, id, err)
	}
	return out, nil
}

// Get returns the value of the record id, or an error matching ErrNotFound.
func (c Collection[T]) Get(ctx context.Context, id string) (T, error) {
	r, err := c.GetRecord(ctx, id)
	return r.Value, err
}

// GetRecord returns the record id with its version and expiry.
func (c Collection[T]) GetRecord(ctx context.Context, id string) (Record[T], error) {
	k, err := c.key(id)
	if err != nil {
		return Record[T]{}, err
	}
	r, err := c.sc.store.Get(ctx, k)
	if err != nil {
		return Record[T]{}, fmt.Errorf("state: get %s/%s: %w", c.name, id, err)
	}
	return c.decode(id, r)
}

// Create stores v under id unless a record has the id (an error matching ErrExists). The record
// never expires unless an option says so.
func (c Collection[T]) Create(ctx context.Context, id string, v T, opts ...WriteOption) error {
	k, err := c.key(id)
	if err != nil {
		return err
	}
	b, err := c.encode(id, v)
	if err != nil {
		return err
	}
	o := applyWrite(opts)
	exp := store.Never
	if o.expiry != nil {
		exp = *o.expiry
	}
	if _, err := c.sc.store.Create(ctx, k, b, exp); err != nil {
		return c.writeErr("create", id, len(b), err)
	}
	return nil
}

// GetOrCreate returns the record id, creating it with v when there is none: created says which.
// It is one conditional write (the store's create answers the existing record when it loses), so
// of concurrent callers exactly one creates and every one gets the same value. The options apply
// only to a record it creates.
func (c Collection[T]) GetOrCreate(ctx context.Context, id string, v T, opts ...WriteOption) (value T, created bool, err error) {
	var zero T
	k, err := c.key(id)
	if err != nil {
		return zero, false, err
	}
	b, err := c.encode(id, v)
	if err != nil {
		return zero, false, err
	}
	o := applyWrite(opts)
	exp := store.Never
	if o.expiry != nil {
		exp = *o.expiry
	}
	cur, err := c.sc.store.Create(ctx, k, b, exp)
	switch {
	case err == nil:
		return v, true, nil
	case !errors.Is(err, store.ErrExists):
		return zero, false, c.writeErr("create", id, len(b), err)
	}
	if cur.Value == nil { // a store that does not answer the record it kept: read it
		if cur, err = c.sc.store.Get(ctx, k); err != nil {
			return zero, false, fmt.Errorf("state: get %s/%s: %w", c.name, id, err)
		}
	}
	r, err := c.decode(id, cur)
	return r.Value, false, err
}

// Update applies fn to the current value of the record id and writes the result if no other
// write happened in between; otherwise it reads again and calls fn again (so fn must only change
// *v, without side effects), up to MaxAttempts times. A missing record is an error matching
// ErrNotFound; an error from fn aborts the update and is returned as is. When fn leaves the
// value unchanged nothing is written. The record keeps its expiry unless an option sets one.
func (c Collection[T]) Update(ctx context.Context, id string, fn func(v *T) error, opts ...WriteOption) (T, error) {
	return c.update(ctx, id, fn, false, opts)
}

// Upsert is Update that creates the record when it is missing: fn then gets the zero value.
func (c Collection[T]) Upsert(ctx context.Context, id string, fn func(v *T) error, opts ...WriteOption) (T, error) {
	return c.update(ctx, id, fn, true, opts)
}

func (c Collection[T]) update(ctx context.Context, id string, fn func(v *T) error, create bool, opts []WriteOption) (T, error) {
	var zero T
	k, err := c.key(id)
	if err != nil {
		return zero, err
	}
	o := applyWrite(opts)
	for attempt := range MaxAttempts {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return zero, fmt.Errorf("state: update %s/%s: %w", c.name, id, err)
			}
		}
		cur, err := c.sc.store.Get(ctx, k)
		missing := errors.Is(err, store.ErrNotFound)
		switch {
		case missing && !create:
			return zero, fmt.Errorf("state: update %s/%s: %w", c.name, id, err)
		case err != nil && !missing:
			return zero, fmt.Errorf("state: update %s/%s: %w", c.name, id, err)
		}
		var v T
		if !missing {
			if err := json.Unmarshal(cur.Value, &v); err != nil {
				return zero, fmt.Errorf("state: decode %s/%s: %w", c.name, id, err)
			}
		}
		if err := fn(&v); err != nil {
			return zero, err
		}
		b, err := c.encode(id, v)
		if err != nil {
			return zero, err
		}
		exp := cur.ExpiresAt
		if o.expiry != nil {
			exp = *o.expiry
		}
		if missing {
			if o.expiry == nil {
				exp = store.Never
			}
			_, err = c.sc.store.Create(ctx, k, b, exp)
		} else {
			if string(b) == string(cur.Value) && exp.Equal(cur.ExpiresAt) {
				return v, nil // unchanged: nothing to write
			}
			_, err = c.sc.store.Update(ctx, k, cur.Version, b, exp)
		}
		switch {
		case err == nil:
			return v, nil
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrExists), errors.Is(err, store.ErrNotFound):
			continue // another write won: read again
		}
		return zero, c.writeErr("update", id, len(b), err)
	}
	return zero, fmt.Errorf("state: update %s/%s: %w (%d attempts)", c.name, id, ErrContention, MaxAttempts)
}

// backoff waits a little, more after each lost round, with jitter so racing writers spread out.
func backoff(ctx context.Context, attempt int) error {
	ceiling := time.Millisecond << min(attempt, 6) // 2 ms .. 64 ms
	t := time.NewTimer(time.Duration(rand.Int64N(int64(ceiling))))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Delete removes the record id; deleting a missing record succeeds.
func (c Collection[T]) Delete(ctx context.Context, id string) error {
	k, err := c.key(id)
	if err != nil {
		return err
	}
	for range MaxAttempts {
		cur, err := c.sc.store.Get(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("state: delete %s/%s: %w", c.name, id, err)
		}
		err = c.sc.store.Delete(ctx, k, cur.Version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("state: delete %s/%s: %w", c.name, id, err)
		}
	}
	return fmt.Errorf("state: delete %s/%s: %w", c.name, id, ErrContention)
}

// DefaultPageSize is the page size of List when ListOptions.Limit is 0.
const DefaultPageSize = 100

// ListOptions selects a page: ids starting with Prefix, strictly after the id After ("" starts
// at the first), at most Limit (DefaultPageSize when 0, store.MaxListLimit at most).
type ListOptions struct {
	Prefix string
	After  string
	Limit  int
}

// Page is one page of a listing; Next is the After of the following page, "" on the last one.
// A page may be short (even empty) and still have a Next.
type Page[T any] struct {
	Records []Record[T]
	Next    string
}

// List returns a page of the records whose id starts with opts.Prefix, in the byte order of
// their escaped ids (the order of the ids themselves unless they contain '%', '/' or bytes that
// are not valid UTF-8). It fails with ErrListUnsupported on a store that cannot list.
func (c Collection[T]) List(ctx context.Context, opts ListOptions) (Page[T], error) {
	if c.err != nil {
		return Page[T]{}, c.err
	}
	l, ok := c.sc.store.(store.Lister)
	if !ok {
		return Page[T]{}, fmt.Errorf("state: list %s: %w (%T implements no store.Lister)", c.name, ErrListUnsupported, c.sc.store)
	}
	limit := opts.Limit
	switch {
	case limit == 0:
		limit = DefaultPageSize
	case limit < 0:
		return Page[T]{}, fmt.Errorf("state: list %s: %w: a negative limit", c.name, ErrInvalid)
	}
	after := ""
	if opts.After != "" {
		after = c.prefix + escape(opts.After)
	}
	p, err := l.List(ctx, c.prefix+escape(opts.Prefix), after, limit)
	if err != nil {
		return Page[T]{}, fmt.Errorf("state: list %s: %w", c.name, err)
	}
	out := Page[T]{Records: make([]Record[T], 0, len(p.Items))}
	for _, it := range p.Items {
		id := unescape(strings.TrimPrefix(it.Key, c.prefix))
		r, err := c.decode(id, it.Record)
		if err != nil {
			return Page[T]{}, err
		}
		out.Records = append(out.Records, r)
	}
	if p.Next != "" {
		out.Next = unescape(strings.TrimPrefix(p.Next, c.prefix))
	}
	return out, nil
}

// All iterates over every record whose id starts with prefix, page after page. It stops at the
// first error, which it yields.
func (c Collection[T]) All(ctx context.Context, prefix string) iter.Seq2[Record[T], error] {
	return func(yield func(Record[T], error) bool) {
		opts := ListOptions{Prefix: prefix, Limit: store.MaxListLimit}
		for {
			p, err := c.List(ctx, opts)
			if err != nil {
				yield(Record[T]{}, err)
				return
			}
			for _, r := range p.Records {
				if !yield(r, nil) {
					return
				}
			}
			if p.Next == "" {
				return
			}
			opts.After = p.Next
		}
	}
}

// escape makes a name or id one key segment: '%', '/', NUL and the bytes of invalid UTF-8 become
// %XX, so no id can reach into another collection, workspace or agent, and a prefix of an id
// stays a prefix of its escaped form.
func escape(s string) string {
	if !strings.ContainsAny(s, "%/\x00") && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1, r == '%', r == '/', r == 0:
			fmt.Fprintf(&b, "%%%02X", s[i])
			i++
		default:
			b.WriteString(s[i : i+size])
			i += size
		}
	}
	return b.String()
}

// unescape reverses escape.
func unescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
