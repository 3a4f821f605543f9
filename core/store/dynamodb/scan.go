package dynamodb

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/supervaize/svz/core/store/internal/kit"
)

type (
	scanInput struct {
		TableName                 string
		FilterExpression          string
		ProjectionExpression      string
		ExpressionAttributeNames  map[string]string
		ExpressionAttributeValues map[string]any
		ExclusiveStartKey         *keyItem `json:",omitempty"`
	}
	scanOutput struct {
		Items            []item
		LastEvaluatedKey *keyItem
	}
)

// ScanKeys calls fn with the key of every live record whose key starts with prefix, in no
// particular order, including those WithUnlisted keeps out of the index: it Scans the whole table
// (DynamoDB has no other way to find keys by prefix without an index), a request per MB of the
// table, each reading every item it passes (half a read unit per 4 KB: the table's size, whatever
// the prefix) and returning the keys that match only. It is for operator tools (svz jobs list),
// never a request's path. The scan is eventually consistent: a record written in the last second
// or so may be missing. An error from fn ends the scan with it.
func (s *Store) ScanKeys(ctx context.Context, prefix string, fn func(key string) error) error {
	if err := s.ready(ctx, prefix); err != nil {
		return fmt.Errorf("dynamodb: scan: %w", err)
	}
	in := scanInput{
		TableName:                s.table,
		FilterExpression:         "begins_with(#k, :prefix) AND #exp > :now",
		ProjectionExpression:     "#k",
		ExpressionAttributeNames: map[string]string{"#k": AttrKey, "#exp": AttrExpires},
	}
	for {
		in.ExpressionAttributeValues = map[string]any{":prefix": sAttr{prefix}, ":now": number(kit.Millis(s.now()))}
		out, err := s.scanPage(ctx, in)
		if err != nil {
			return err
		}
		for _, it := range out.Items {
			raw, err := attrValue(it, AttrKey, "S")
			var key string
			if err == nil && (raw == nil || json.Unmarshal(raw, &key) != nil) {
				err = fmt.Errorf("%w: no key", errCorrupt)
			}
			if err != nil {
				return fmt.Errorf("dynamodb: scan: %w", err)
			}
			if err := fn(key); err != nil {
				return err
			}
		}
		if out.LastEvaluatedKey == nil {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// scanPage is one Scan request, bounded by the store's timeout.
func (s *Store) scanPage(ctx context.Context, in scanInput) (*scanOutput, error) {
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	var out scanOutput
	if err := s.api.Call(ctx, "Scan", in, &out); err != nil {
		return nil, fmt.Errorf("dynamodb: scan: %w", kit.TimedOut(ctx, err))
	}
	return &out, nil
}
