// Package dynamodb is the DynamoDB store.Store, on internal/awsapi: signed JSON requests, no AWS
// SDK service client, so a Lambda bootstrap that links it pays nothing at start. Every operation
// is one conditional request (GetItem with strong consistency, PutItem, DeleteItem), hence one
// round trip; a failed condition returns the item as it was (ReturnValuesOnConditionCheckFailure),
// so ErrExists carries the live record and Update can tell ErrNotFound from ErrConflict.
//
// Table schema (see CreateTable):
//
//	k    S  partition key: the record key (no sort key)
//	v    B  the value
//	ver  N  the version, random, set on every write
//	exp  N  expiry in Unix milliseconds; the record is live while now < exp
//	ttl  N  exp in Unix seconds plus SweepGrace, for DynamoDB's TTL sweeper
//
// The store compares exp with its own clock in every condition and read: DynamoDB has no server
// clock in conditions, and its TTL sweeper may lag by hours, so enabling TTL on "ttl" only reclaims
// space. Values are limited to MaxValueSize bytes.
//
// Transient failures (throttling, 5xx, transport errors) are retried by awsapi, writes included:
// every write is conditional and carries a fresh random version, so when a retry finds its
// condition failed by an item holding its own version, the first attempt was applied and only its
// answer was lost; Create and Update then succeed, as they did. A retried Delete whose first
// attempt was applied finds no item, which its condition accepts. Every call, its retries
// included, is bounded by the store timeout (WithTimeout).
//
// Listing: every item also carries ix = "0", the partition key of the global secondary index
// IndexName (sort key k, projection KEYS_ONLY), so that List is a Query of the index's one
// partition with begins_with on k, in byte order, then strongly consistent BatchGetItem reads of
// the page's items. A KEYS_ONLY index changes only when an item is created or deleted, never on
// Update; each such change costs one more write unit. Items under the prefixes of WithUnlisted
// (the idempotency records, which are never listed) carry no ix and cost the index nothing. The
// cost: creations and deletions of listed items go through one index partition (about 1,000 a
// second before DynamoDB throttles them), and the index is eventually consistent, so a record
// created or deleted in the last second or so may be missing from, or still in, the keys a
// listing reads (the values are read consistently: a deleted record is never listed).
// A table without the index serves every call but List (see CreateTable). ScanKeys finds the keys
// under a prefix, unlisted ones included, by a Scan of the whole table: for operator tools only.
package dynamodb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
	"github.com/supervaize/svz/internal/awsapi"
)

// MaxValueSize is the value limit of the DynamoDB store. An item holds at most 400 KB, key and
// attribute names included; the limit leaves room for them and for moto_server, which counts
// binary attributes in their base64 form.
const MaxValueSize = 300_000

// SweepGrace is how long after its logical expiry the ttl attribute lets DynamoDB drop a record.
const SweepGrace = time.Hour

// DefaultTimeout bounds each call unless WithTimeout says otherwise.
const DefaultTimeout = kit.DefaultTimeout

// IndexName is the global secondary index List reads: partition key AttrIndex (S), sort key
// AttrKey (S), projection KEYS_ONLY.
const IndexName = "svz-keys"

// indexValue is AttrIndex of every item: the index has one partition, sorted by key.
const indexValue = "0"

// MaxListPage caps a List page: the keys of one Query, read with one round of BatchGetItem.
const MaxListPage = 100

// batchKeys is how many items one BatchGetItem asks for: the answer for that many items of the
// largest size fits what awsapi reads of an answer (awsapi.MaxResponse).
const batchKeys = 4

// batchConcurrency bounds the BatchGetItem requests of one List in flight at once.
const batchConcurrency = 8

// Attribute names of the table.
const (
	AttrKey     = "k"
	AttrValue   = "v"
	AttrVersion = "ver"
	AttrExpires = "exp"
	AttrTTL     = "ttl"
	AttrIndex   = "ix"
)

// Store is a store.Store in a DynamoDB table.
type Store struct {
	api     *awsapi.Client
	table   string
	now     func() time.Time
	timeout time.Duration
	closed  atomic.Bool
	indexed atomic.Bool // the table has IndexName
	// unlisted: keys under these prefixes stay out of the index (WithUnlisted).
	unlisted []string

	logPoll  time.Duration // store.Log, in log.go
	logOnce  sync.Once
	logState *ddbLogs
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// Option configures New.
type Option func(*Store)

// WithClock makes the store compare expiries with now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithTimeout bounds every call, awsapi's retries included (default DefaultTimeout; 0 or less:
// no bound but the caller's context and awsapi's per-attempt limit).
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithUnlisted keeps records whose key starts with one of prefixes out of the index IndexName:
// they are never listed, and their creation and deletion cost no index write (one write unit
// each). List then refuses, with store.ErrInvalid, a prefix whose records could include such
// keys, rather than answer a listing that silently misses them. The idempotency records are
// such keys (storeenv passes their prefix): the gate reads them by key, never lists them.
func WithUnlisted(prefixes ...string) Option {
	return func(s *Store) { s.unlisted = append(s.unlisted, prefixes...) }
}

// listed reports whether the record under key enters the index.
func (s *Store) listed(key string) bool {
	for _, p := range s.unlisted {
		if strings.HasPrefix(key, p) {
			return false
		}
	}
	return true
}

// NewClient returns a DynamoDB API client configured by getenv (os.Getenv in production):
// AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL, and the credentials of the
// environment or of the container credentials endpoint (see internal/awsapi); storeenv adds the
// AWS SDK's default chain as the fallback (awsapi.WithFallback).
func NewClient(getenv func(string) string, opts ...awsapi.Option) (*awsapi.Client, error) {
	return awsapi.New(getenv, awsapi.Service{ID: "dynamodb", Name: "DynamoDB", Target: "DynamoDB_20120810", JSONVersion: "1.0"}, opts...)
}

// New checks that table exists with the store's key schema and returns a Store on it, calling
// DynamoDB through api (from NewClient).
func New(ctx context.Context, api *awsapi.Client, table string, opts ...Option) (*Store, error) {
	if table == "" {
		return nil, errors.New("dynamodb: no table name")
	}
	t, err := describeTable(ctx, api, table)
	if isCode(err, "ResourceNotFoundException") {
		return nil, fmt.Errorf("dynamodb: table %q does not exist (create it with partition key %q of type S)", table, AttrKey)
	}
	if err != nil {
		return nil, fmt.Errorf("dynamodb: cannot reach table %q: %w", table, err)
	}
	if err := checkSchema(t); err != nil {
		return nil, fmt.Errorf("dynamodb: table %q: %w", table, err)
	}
	s := &Store{api: api, table: table, now: time.Now, timeout: DefaultTimeout}
	s.indexed.Store(hasIndex(t))
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// tableDescription is what the store reads of DescribeTable.
type tableDescription struct {
	TableStatus            string
	KeySchema              []keySchemaElement
	AttributeDefinitions   []attributeDefinition
	GlobalSecondaryIndexes []struct {
		IndexName   string
		IndexStatus string
		KeySchema   []keySchemaElement
	}
}

type keySchemaElement struct {
	AttributeName string
	KeyType       string
}

type attributeDefinition struct {
	AttributeName string
	AttributeType string
}

type tableName struct{ TableName string }

func describeTable(ctx context.Context, api *awsapi.Client, table string) (*tableDescription, error) {
	var out struct{ Table *tableDescription }
	if err := api.Call(ctx, "DescribeTable", tableName{table}, &out); err != nil {
		return nil, err
	}
	if out.Table == nil {
		return nil, errors.New("DescribeTable answered without a table")
	}
	return out.Table, nil
}

// hasIndex reports whether the table has the index List reads, ready to be read.
func hasIndex(t *tableDescription) bool {
	for _, ix := range t.GlobalSecondaryIndexes {
		if ix.IndexName == IndexName && ix.IndexStatus == "ACTIVE" && len(ix.KeySchema) == 2 &&
			ix.KeySchema[0] == (keySchemaElement{AttrIndex, "HASH"}) && ix.KeySchema[1] == (keySchemaElement{AttrKey, "RANGE"}) {
			return true
		}
	}
	return false
}

func checkSchema(t *tableDescription) error {
	if len(t.KeySchema) != 1 || t.KeySchema[0].AttributeName != AttrKey || t.KeySchema[0].KeyType != "HASH" {
		return fmt.Errorf("its key schema must be exactly partition key %q", AttrKey)
	}
	for _, a := range t.AttributeDefinitions {
		if a.AttributeName == AttrKey && a.AttributeType != "S" {
			return fmt.Errorf("partition key %q must be of type S, not %s", AttrKey, a.AttributeType)
		}
	}
	return nil
}

// CreateTable creates table with the store's schema, its index IndexName and on-demand billing,
// waits until it is active and enables TTL on the ttl attribute. It fails if the table exists.
// Tests use it; a deployment declares the table (see deploy/lambda, or the SAM template).
func CreateTable(ctx context.Context, api *awsapi.Client, table string) error {
	type projection struct{ ProjectionType string }
	type index struct {
		IndexName  string
		KeySchema  []keySchemaElement
		Projection projection
	}
	in := struct {
		TableName              string
		BillingMode            string
		AttributeDefinitions   []attributeDefinition
		KeySchema              []keySchemaElement
		GlobalSecondaryIndexes []index
	}{
		TableName:   table,
		BillingMode: "PAY_PER_REQUEST",
		AttributeDefinitions: []attributeDefinition{{AttributeName: AttrKey, AttributeType: "S"},
			{AttributeName: AttrIndex, AttributeType: "S"}},
		KeySchema: []keySchemaElement{{AttrKey, "HASH"}},
		GlobalSecondaryIndexes: []index{{IndexName: IndexName,
			KeySchema:  []keySchemaElement{{AttrIndex, "HASH"}, {AttrKey, "RANGE"}},
			Projection: projection{"KEYS_ONLY"}}},
	}
	if err := api.Call(ctx, "CreateTable", in, nil); err != nil {
		return fmt.Errorf("dynamodb: create table %q: %w", table, err)
	}
	if err := waitActive(ctx, api, table, 2*time.Minute); err != nil {
		return fmt.Errorf("dynamodb: wait for table %q: %w", table, err)
	}
	type ttlSpec struct {
		AttributeName string
		Enabled       bool
	}
	ttl := struct {
		TableName               string
		TimeToLiveSpecification ttlSpec
	}{table, ttlSpec{AttrTTL, true}}
	if err := api.Call(ctx, "UpdateTimeToLive", ttl, nil); err != nil {
		return fmt.Errorf("dynamodb: enable TTL on table %q: %w", table, err)
	}
	return nil
}

// waitActive polls DescribeTable until the table is ACTIVE, for at most limit.
func waitActive(ctx context.Context, api *awsapi.Client, table string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		t, err := describeTable(ctx, api, table)
		switch {
		case err == nil && t.TableStatus == "ACTIVE":
			return nil
		case err != nil && !isCode(err, "ResourceNotFoundException"): // not yet visible is fine
			return err
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("table not active: %w", ctx.Err())
		case <-timer.C:
		}
	}
}

// Wire shapes of attribute values and items.
type (
	sAttr struct{ S string }
	nAttr struct{ N string }
	bAttr struct{ B []byte } // never nil: null is not a binary
	// keyItem is the primary key of an item.
	keyItem struct {
		K sAttr `json:"k"`
	}
	// fullItem is a record as stored; its JSON names are the Attr constants.
	fullItem struct {
		K   sAttr  `json:"k"`
		Ix  *sAttr `json:"ix,omitempty"` // absent for a key WithUnlisted keeps out of the index
		V   bAttr  `json:"v"`
		Ver nAttr  `json:"ver"`
		Exp nAttr  `json:"exp"`
		TTL *nAttr `json:"ttl,omitempty"` // absent for a record that does not expire
	}
	// item is an item as read: attribute name → {type: JSON value}.
	item map[string]map[string]json.RawMessage
)

type getItemInput struct {
	TableName      string
	Key            keyItem
	ConsistentRead bool
}

type putItemInput struct {
	TableName                           string
	Item                                fullItem
	ConditionExpression                 string
	ExpressionAttributeNames            map[string]string
	ExpressionAttributeValues           map[string]nAttr
	ReturnValuesOnConditionCheckFailure string
}

type deleteItemInput struct {
	TableName                 string
	Key                       keyItem
	ConditionExpression       string
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]nAttr
}

// itemOutput is a GetItem answer, and the body of a ConditionalCheckFailedException.
type itemOutput struct{ Item item }

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.ready(ctx, key); err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: get: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	var out itemOutput
	err := s.api.Call(ctx, "GetItem", getItemInput{TableName: s.table, Key: keyItem{sAttr{key}}, ConsistentRead: true}, &out)
	if err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: get: %w", kit.TimedOut(ctx, err))
	}
	rec, live, err := s.decodeAt(out.Item, s.now())
	switch {
	case err != nil:
		return store.Record{}, fmt.Errorf("dynamodb: get %q: %w", key, err)
	case !live:
		return store.Record{}, fmt.Errorf("dynamodb: get: %w", store.ErrNotFound)
	}
	return rec, nil
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, key string, value []byte, expiresAt time.Time) (store.Record, error) {
	now := s.now()
	if err := s.readyWrite(ctx, key, value, expiresAt, now); err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: create: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	rec := store.Record{Value: kit.Clone(value), Version: kit.NewVersion(), ExpiresAt: kit.Time(kit.Millis(expiresAt))}
	err := s.api.Call(ctx, "PutItem", putItemInput{
		TableName:                           s.table,
		Item:                                encode(key, rec, s.listed(key)),
		ConditionExpression:                 "attribute_not_exists(#k) OR #exp <= :now",
		ExpressionAttributeNames:            map[string]string{"#k": AttrKey, "#exp": AttrExpires},
		ExpressionAttributeValues:           map[string]nAttr{":now": number(kit.Millis(now))},
		ReturnValuesOnConditionCheckFailure: "ALL_OLD",
	}, nil)
	if old, failed := conditionFailed(err); failed {
		if ownWrite(old, rec.Version) {
			return rec, nil // a retry after the first attempt was applied
		}
		cur, live, err := s.decodeAt(old, now)
		switch {
		case err != nil:
			return store.Record{}, fmt.Errorf("dynamodb: create %q: %w", key, err)
		case !live: // cannot happen: the condition let expired items through
			return store.Record{}, fmt.Errorf("dynamodb: create %q: condition failed on an expired item", key)
		}
		return cur, fmt.Errorf("dynamodb: create: %w", store.ErrExists)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: create: %w", kit.TimedOut(ctx, err))
	}
	return rec, nil
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time) (store.Record, error) {
	now := s.now()
	if err := s.readyWrite(ctx, key, value, expiresAt, now); err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: update: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	rec := store.Record{Value: kit.Clone(value), Version: kit.NewVersion(), ExpiresAt: kit.Time(kit.Millis(expiresAt))}
	err := s.api.Call(ctx, "PutItem", putItemInput{
		TableName:                           s.table,
		Item:                                encode(key, rec, s.listed(key)),
		ConditionExpression:                 "#ver = :ver AND #exp > :now",
		ExpressionAttributeNames:            map[string]string{"#ver": AttrVersion, "#exp": AttrExpires},
		ExpressionAttributeValues:           map[string]nAttr{":ver": {strconv.FormatUint(version, 10)}, ":now": number(kit.Millis(now))},
		ReturnValuesOnConditionCheckFailure: "ALL_OLD",
	}, nil)
	if old, failed := conditionFailed(err); failed {
		if ownWrite(old, rec.Version) {
			return rec, nil // a retry after the first attempt was applied
		}
		_, live, err := s.decodeAt(old, now)
		switch {
		case err != nil:
			return store.Record{}, fmt.Errorf("dynamodb: update %q: %w", key, err)
		case !live:
			return store.Record{}, fmt.Errorf("dynamodb: update: %w", store.ErrNotFound)
		}
		return store.Record{}, fmt.Errorf("dynamodb: update: %w", store.ErrConflict)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: update: %w", kit.TimedOut(ctx, err))
	}
	return rec, nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string, version uint64) error {
	if err := s.ready(ctx, key); err != nil {
		return fmt.Errorf("dynamodb: delete: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	err := s.api.Call(ctx, "DeleteItem", deleteItemInput{
		TableName:                 s.table,
		Key:                       keyItem{sAttr{key}},
		ConditionExpression:       "attribute_not_exists(#k) OR #ver = :ver OR #exp <= :now",
		ExpressionAttributeNames:  map[string]string{"#k": AttrKey, "#ver": AttrVersion, "#exp": AttrExpires},
		ExpressionAttributeValues: map[string]nAttr{":ver": {strconv.FormatUint(version, 10)}, ":now": number(kit.Millis(s.now()))},
	}, nil)
	if _, failed := conditionFailed(err); failed {
		return fmt.Errorf("dynamodb: delete: %w", store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("dynamodb: delete: %w", kit.TimedOut(ctx, err))
	}
	return nil
}

// MaxValueSize implements store.Store.
func (s *Store) MaxValueSize() int { return MaxValueSize }

// Close implements store.Store. The API client holds nothing to release.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *Store) ready(ctx context.Context, key string) error {
	return kit.Ready(ctx, s.closed.Load(), key)
}

func (s *Store) readyWrite(ctx context.Context, key string, value []byte, expiresAt, now time.Time) error {
	return kit.ReadyWrite(ctx, s.closed.Load(), key, value, MaxValueSize, expiresAt, now)
}

// encode returns the item of a record; listed puts it in the index.
func encode(key string, r store.Record, listed bool) fullItem {
	exp := kit.Millis(r.ExpiresAt)
	item := fullItem{
		K:   sAttr{key},
		V:   bAttr{r.Value},
		Ver: nAttr{strconv.FormatUint(r.Version, 10)},
		Exp: number(exp),
	}
	if listed {
		item.Ix = &sAttr{indexValue}
	}
	if exp != kit.NeverMillis {
		ttl := number(exp/1000 + 1 + int64(SweepGrace/time.Second))
		item.TTL = &ttl
	}
	return item
}

func number(n int64) nAttr { return nAttr{strconv.FormatInt(n, 10)} }

func isCode(err error, code string) bool {
	var api *awsapi.APIError
	return errors.As(err, &api) && api.Code == code
}

// conditionFailed reports whether err is a failed condition, with the item as it was (nil when
// there was none, or the answer did not carry it).
func conditionFailed(err error) (item, bool) {
	var api *awsapi.APIError
	if !errors.As(err, &api) || api.Code != "ConditionalCheckFailedException" {
		return nil, false
	}
	var out itemOutput
	_ = json.Unmarshal(api.Body, &out) // without the item, the caller sees an absent record
	return out.Item, true
}

// ownWrite reports whether old holds version, which only the write that drew it can have put.
func ownWrite(old item, version uint64) bool {
	raw, err := attrValue(old, AttrVersion, "N")
	if err != nil || raw == nil {
		return false
	}
	var v string
	return json.Unmarshal(raw, &v) == nil && v == strconv.FormatUint(version, 10)
}

// decodeAt parses an item and reports whether it is live at now. A nil item is absent.
func (s *Store) decodeAt(it item, now time.Time) (store.Record, bool, error) {
	if it == nil {
		return store.Record{}, false, nil
	}
	rec, expires, err := decode(it)
	if err != nil {
		return store.Record{}, false, err
	}
	return rec, kit.Live(expires, now), nil
}

// errCorrupt marks an item that is not a record this package wrote.
var errCorrupt = errors.New("corrupt item")

// attrValue returns the JSON value of attribute name, which must be of type typ (S, N, B...);
// nil when the item has no such attribute.
func attrValue(it item, name, typ string) (json.RawMessage, error) {
	av, ok := it[name]
	if !ok {
		return nil, nil
	}
	raw, ok := av[typ]
	if !ok || len(av) != 1 || bytes.Equal(raw, []byte("null")) {
		return nil, fmt.Errorf("%w: attribute %q is not of type %s", errCorrupt, name, typ)
	}
	return raw, nil
}

// numberAttr returns the digits of the number attribute name.
func numberAttr(it item, name string) (string, error) {
	raw, err := attrValue(it, name, "N")
	if err != nil {
		return "", err
	}
	var n string
	if raw == nil || json.Unmarshal(raw, &n) != nil {
		return "", fmt.Errorf("%w: %q must be a number", errCorrupt, name)
	}
	return n, nil
}

func decode(it item) (rec store.Record, expiresMs int64, err error) {
	ver, err := numberAttr(it, AttrVersion)
	if err != nil {
		return store.Record{}, 0, err
	}
	exp, err := numberAttr(it, AttrExpires)
	if err != nil {
		return store.Record{}, 0, err
	}
	version, err := strconv.ParseUint(ver, 10, 63)
	if err != nil || version == 0 {
		return store.Record{}, 0, fmt.Errorf("%w: version %q", errCorrupt, ver)
	}
	expiresMs, err = strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return store.Record{}, 0, fmt.Errorf("%w: expiry %q", errCorrupt, exp)
	}
	raw, err := attrValue(it, AttrValue, "B")
	if err != nil {
		return store.Record{}, 0, err
	}
	value := []byte{} // an empty binary may come back absent
	if raw != nil {
		if err := json.Unmarshal(raw, &value); err != nil {
			return store.Record{}, 0, fmt.Errorf("%w: value is not base64", errCorrupt)
		}
		if value == nil {
			value = []byte{}
		}
	}
	return store.Record{Value: value, Version: version, ExpiresAt: kit.Time(expiresMs)}, expiresMs, nil
}
