package jobs

import (
	"context"

	"github.com/supervaize/svz/core/store"
)

// ListTaskKeys lists the keys of the task records under prefix (TaskKeyPrefix and more) as List
// does, with pages of limit records.
func ListTaskKeys(ctx context.Context, l store.Lister, prefix string, limit int) ([]string, error) {
	var keys []string
	err := listTasks(ctx, l, prefix, limit, func(k string) bool { _, _, child := cutTask(k); return !child }, func(k string, _ []byte) error {
		keys = append(keys, k)
		return nil
	})
	return keys, err
}
