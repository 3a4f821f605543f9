package dynamodb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

type (
	// indexKey is an entry of the index: its keys, all a KEYS_ONLY index holds.
	indexKey struct {
		Ix sAttr `json:"ix"`
		K  sAttr `json:"k"`
	}
	queryInput struct {
		TableName                 string
		IndexName                 string
		KeyConditionExpression    string
		ExpressionAttributeNames  map[string]string
		ExpressionAttributeValues map[string]sAttr
		ExclusiveStartKey         *indexKey `json:",omitempty"`
		Limit                     int
	}
	queryOutput struct {
		Items            []indexKey
		LastEvaluatedKey *indexKey
	}
	keysAndConsistency struct {
		Keys           []keyItem
		ConsistentRead bool
	}
	batchGetInput struct {
		RequestItems map[string]keysAndConsistency
	}
	batchGetOutput struct {
		Responses       map[string][]item
		UnprocessedKeys map[string]keysAndConsistency
	}
)

// List implements store.Lister: one Query of the index for the page's keys (at most
// MaxListPage), in byte order, then BatchGetItem reads of their items, strongly consistent, a few
// keys per request and several requests at once. See the package documentation for what the
// index costs and how fresh it is.
func (s *Store) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	limit, err := kit.ReadyList(ctx, s.closed.Load(), prefix, after, limit)
	if err != nil {
		return store.Page{}, fmt.Errorf("dynamodb: list: %w", err)
	}
	for _, p := range s.unlisted {
		if strings.HasPrefix(prefix, p) || strings.HasPrefix(p, prefix) {
			return store.Page{}, fmt.Errorf("dynamodb: list: prefix %q may hold keys under %q, which this store keeps out of its index (WithUnlisted): %w",
				prefix, p, store.ErrInvalid)
		}
	}
	span := kit.ListRange(prefix, after)
	if span.Empty {
		return store.Page{}, nil
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	if err := s.checkIndex(ctx); err != nil {
		return store.Page{}, fmt.Errorf("dynamodb: list: %w", kit.TimedOut(ctx, err))
	}
	in := queryInput{
		TableName:                 s.table,
		IndexName:                 IndexName,
		KeyConditionExpression:    "#ix = :ix AND begins_with(#k, :prefix)",
		ExpressionAttributeNames:  map[string]string{"#ix": AttrIndex, "#k": AttrKey},
		ExpressionAttributeValues: map[string]sAttr{":ix": {indexValue}, ":prefix": {prefix}},
		Limit:                     min(limit, MaxListPage),
	}
	if span.Exclusive { // after lies within the prefix's span: resume past it
		in.ExclusiveStartKey = &indexKey{sAttr{indexValue}, sAttr{after}}
	}
	var out queryOutput
	if err := s.api.Call(ctx, "Query", in, &out); err != nil {
		return store.Page{}, fmt.Errorf("dynamodb: list: %w", kit.TimedOut(ctx, err))
	}
	keys := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		if span.In(it.K.S) { // always, unless the index answers out of its contract
			keys = append(keys, it.K.S)
		}
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return store.Page{}, fmt.Errorf("dynamodb: list: %w", kit.TimedOut(ctx, err))
	}
	now := s.now()
	page := kit.NewPage(limit)
	for i, k := range keys {
		rec, live, err := s.decodeAt(items[k], now)
		switch {
		case err != nil:
			return store.Page{}, fmt.Errorf("dynamodb: list: record %q: %w", k, err)
		case !live: // expired, or deleted since the index was read
			continue
		}
		if !page.Add(k, rec) {
			return page.Done(k, i < len(keys)-1 || out.LastEvaluatedKey != nil), nil
		}
	}
	last := ""
	switch {
	case len(keys) > 0:
		last = keys[len(keys)-1]
	case out.LastEvaluatedKey != nil: // a page that read nothing, yet did not reach the end
		last = out.LastEvaluatedKey.K.S
	}
	return page.Done(last, out.LastEvaluatedKey != nil && last != ""), nil
}

// checkIndex fails unless the table has IndexName; a table that lacked it at New is described
// again, so an index added since serves without a restart.
func (s *Store) checkIndex(ctx context.Context) error {
	if s.indexed.Load() {
		return nil
	}
	t, err := describeTable(ctx, s.api, s.table)
	if err != nil {
		return err
	}
	if !hasIndex(t) {
		return fmt.Errorf("table %q has no active global secondary index %q (partition key %q of type S, sort key %q of type S, projection KEYS_ONLY): add it to list records",
			s.table, IndexName, AttrIndex, AttrKey)
	}
	s.indexed.Store(true)
	return nil
}

// batchGet reads the items of keys, strongly consistent, and returns them by key; an absent
// item is missing from the map.
func (s *Store) batchGet(ctx context.Context, keys []string) (map[string]item, error) {
	got := make(map[string]item, len(keys))
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	slots := make(chan struct{}, batchConcurrency)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for start := 0; start < len(keys); start += batchKeys {
		chunk := keys[start:min(start+batchKeys, len(keys))]
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			items, err := s.batchGetChunk(ctx, chunk)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			for _, it := range items {
				if k, err := attrValue(it, AttrKey, "S"); err == nil && k != nil {
					var key string
					if json.Unmarshal(k, &key) == nil {
						got[key] = it
					}
				}
			}
		})
	}
	wg.Wait()
	return got, firstErr
}

// batchGetChunk reads a few items in one BatchGetItem, asking again for those DynamoDB left
// unprocessed (it may, under load), until none is left or ctx ends.
func (s *Store) batchGetChunk(ctx context.Context, keys []string) ([]item, error) {
	req := keysAndConsistency{ConsistentRead: true}
	for _, k := range keys {
		req.Keys = append(req.Keys, keyItem{sAttr{k}})
	}
	var items []item
	for attempt := 0; len(req.Keys) > 0; attempt++ {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return nil, err
			}
		}
		var out batchGetOutput
		if err := s.api.Call(ctx, "BatchGetItem", batchGetInput{map[string]keysAndConsistency{s.table: req}}, &out); err != nil {
			return nil, err
		}
		items = append(items, out.Responses[s.table]...)
		req.Keys = out.UnprocessedKeys[s.table].Keys
		if len(req.Keys) > 0 && attempt+1 >= maxBatchAttempts {
			return nil, fmt.Errorf("BatchGetItem left %d keys unprocessed %d times", len(req.Keys), maxBatchAttempts)
		}
	}
	return items, nil
}

// maxBatchAttempts bounds the BatchGetItem requests for one chunk of keys.
const maxBatchAttempts = 10

// pause waits before the attempt-th request for unprocessed keys: 50 ms, doubling, at most 1 s.
func pause(ctx context.Context, attempt int) error {
	t := time.NewTimer(min(50*time.Millisecond<<(attempt-1), time.Second))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
