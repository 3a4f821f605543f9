package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
)

// lister returns s as a store.Lister; every backend of svz lists.
func lister(t *testing.T, s store.Store) store.Lister {
	t.Helper()
	l, ok := s.(store.Lister)
	if !ok {
		t.Fatalf("%T does not implement store.Lister", s)
	}
	return l
}

func testNeverExpires(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("forever")
	created, err := s.Create(ctx, k, []byte("v1"), store.Never)
	if err != nil {
		t.Fatalf("Create(Never): %v", err)
	}
	if !created.ExpiresAt.IsZero() {
		t.Errorf("Create(Never).ExpiresAt = %v, want the zero time", created.ExpiresAt)
	}
	c.Advance(100 * 365 * 24 * time.Hour)
	got := mustGet(t, s, k)
	assertRecord(t, "Get a century later", got, store.Record{Value: []byte("v1"), Version: created.Version})
	if _, err := s.Create(ctx, k, []byte("v2"), store.Never); !errors.Is(err, store.ErrExists) {
		t.Errorf("Create over a record that never expires: error = %v, want ErrExists", err)
	}
	// A record that does not expire can be given an expiry, and back.
	exp := c.Now().Add(time.Minute)
	updated, err := s.Update(ctx, k, got.Version, []byte("v2"), exp)
	if err != nil {
		t.Fatalf("Update to an expiry: %v", err)
	}
	assertRecord(t, "Update to an expiry", updated, store.Record{Value: []byte("v2"), Version: updated.Version, ExpiresAt: exp.UTC()})
	again, err := s.Update(ctx, k, updated.Version, []byte("v3"), store.Never)
	if err != nil {
		t.Fatalf("Update back to Never: %v", err)
	}
	c.Advance(2 * time.Minute)
	assertRecord(t, "Get after the former expiry", mustGet(t, s, k), store.Record{Value: []byte("v3"), Version: again.Version})
	if err := s.Delete(ctx, k, again.Version); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: error = %v, want ErrNotFound", err)
	}
}

// listAll follows Next until the last page, with pages of limit.
func listAll(t *testing.T, l store.Lister, prefix string, limit int) []store.Item {
	t.Helper()
	var all []store.Item
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatalf("List(%q) did not end after %d pages", prefix, pages)
		}
		page, err := l.List(context.Background(), prefix, after, limit)
		if err != nil {
			t.Fatalf("List(%q, after %q, %d): %v", prefix, after, limit, err)
		}
		if len(page.Items) > limit {
			t.Fatalf("List(%q, %d) returned %d items", prefix, limit, len(page.Items))
		}
		all = append(all, page.Items...)
		if page.Next == "" {
			return all
		}
		if page.Next <= after {
			t.Fatalf("List(%q): Next %q does not move past after %q", prefix, page.Next, after)
		}
		after = page.Next
	}
}

func keysOf(items []store.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Key
	}
	return out
}

func testListPages(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	l := lister(t, s)
	prefix := key("p/")
	var want []string
	for i := range 25 {
		k := prefix + fmt.Sprintf("%03d", i)
		exp := c.Now().Add(time.Hour)
		if i%3 == 0 {
			exp = store.Never
		}
		mustCreate(t, s, k, "v"+fmt.Sprint(i), exp)
		want = append(want, k)
	}
	for _, limit := range []int{1, 7, 25, 1000} {
		items := listAll(t, l, prefix, limit)
		if got := keysOf(items); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("List with pages of %d = %v, want %v", limit, got, want)
			continue
		}
		for i, it := range items {
			if string(it.Value) != "v"+fmt.Sprint(i) || it.Version == 0 {
				t.Errorf("item %q = %q version %d, want value v%d and a version", it.Key, it.Value, it.Version, i)
			}
			if (i%3 == 0) != it.ExpiresAt.IsZero() {
				t.Errorf("item %q ExpiresAt = %v: wrong expiry", it.Key, it.ExpiresAt)
			}
		}
	}
	// Starting after a key that sorts between two stored keys.
	page, err := l.List(context.Background(), prefix, prefix+"010x", 3)
	if err != nil {
		t.Fatalf("List after a missing key: %v", err)
	}
	if got := keysOf(page.Items); len(got) != 3 || got[0] != prefix+"011" || got[2] != prefix+"013" {
		t.Errorf("List after %q = %v, want %s011..013", prefix+"010x", got, prefix)
	}
}

func testListPrefixBoundaries(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	l := lister(t, s)
	exp := c.Now().Add(time.Hour)
	base := key("b")
	// Byte order, not a language's: "B" < "_" < "a" < "é" < "😀", "a b" < "a-b" < "a/b" < "ab".
	for _, k := range []string{base + "/", base + "/a", base + "/ab", base + "/a/b", base + "/a-b", base + "/a b", base + "/B",
		base + "/_", base + "/é", base + "0", base, base + ".", base + "/\U0001F600", base + "/\uFFFF", base + "/\U0010FFFF"} {
		mustCreate(t, s, k, "x", exp)
	}
	got := keysOf(listAll(t, l, base+"/", 2))
	want := []string{base + "/", base + "/B", base + "/_", base + "/a", base + "/a b", base + "/a-b", base + "/a/b", base + "/ab",
		base + "/é", base + "/\uFFFF", base + "/\U0001F600", base + "/\U0010FFFF"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("List(%q) = %q, want %q (byte order, nothing outside the prefix)", base+"/", got, want)
	}
	if got := listAll(t, l, base+"/zzz", 10); len(got) != 0 {
		t.Errorf("List of an empty prefix = %v, want nothing", keysOf(got))
	}
	// A prefix ending in the last code point, which no key range can end with.
	if got := keysOf(listAll(t, l, base+"/\U0010FFFF", 10)); len(got) != 1 || got[0] != base+"/\U0010FFFF" {
		t.Errorf("List(%q) = %q, want only itself", base+"/\U0010FFFF", got)
	}
	// after beyond the prefix's span, and before it.
	if page, err := l.List(context.Background(), base+"/a", base+"/b", 10); err != nil || len(page.Items) != 0 || page.Next != "" {
		t.Errorf("List after the span = %v, %v; want an empty last page", keysOf(page.Items), err)
	}
	if page, err := l.List(context.Background(), base+"/a", base+"/", 10); err != nil || strings.Join(keysOf(page.Items), "|") != strings.Join(want[3:8], "|") {
		t.Errorf("List after a key before the span = %q, %v; want %q", keysOf(page.Items), err, want[3:8])
	}
}

func testListSkipsExpired(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	l := lister(t, s)
	prefix := key("e/")
	for i := range 10 {
		exp := c.Now().Add(time.Hour)
		if i%2 == 1 {
			exp = c.Now().Add(time.Second)
		}
		mustCreate(t, s, prefix+fmt.Sprint(i), "x", exp)
	}
	c.Advance(time.Second)
	got := keysOf(listAll(t, l, prefix, 2))
	if strings.Join(got, ",") != strings.Join([]string{prefix + "0", prefix + "2", prefix + "4", prefix + "6", prefix + "8"}, ",") {
		t.Errorf("List after half expired = %v, want the even keys only", got)
	}
}

func testListInvalidArguments(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	l := lister(t, s)
	ctx := context.Background()
	for _, tc := range []struct {
		prefix string
		limit  int
		after  string
	}{{"", 10, ""}, {key("x"), 0, ""}, {key("x"), -1, ""}, {"a\x00", 10, ""}, {strings.Repeat("k", store.MaxKeyLen+1), 10, ""},
		{key("x"), 10, key("x\xff")}, {key("x"), 10, key("x\x00")}} {
		if _, err := l.List(ctx, tc.prefix, tc.after, tc.limit); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("List(%.20q, after %q, limit %d) error = %v, want ErrInvalid", tc.prefix, tc.after, tc.limit, err)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.List(canceled, key("x"), "", 10); err == nil {
		t.Error("List with a canceled context succeeded")
	}
}

// testListLargeValues: pages of large values end early, with a Next, and the listing still
// returns every record once.
func testListLargeValues(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	l := lister(t, s)
	prefix := key("big/")
	size := s.MaxValueSize()
	n := (4<<20)/size + 2 // more than one page's worth of values
	var want []string
	for i := range n {
		k := prefix + fmt.Sprintf("%03d", i)
		v := randomBytes(size)
		if _, err := s.Create(context.Background(), k, v, c.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Create(%q, %d bytes): %v", k, size, err)
		}
		want = append(want, k)
	}
	var got []string
	after, pages := "", 0
	for {
		page, err := l.List(context.Background(), prefix, after, store.MaxListLimit)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		pages++
		bytes := 0
		for _, it := range page.Items {
			got = append(got, it.Key)
			if len(it.Value) != size {
				t.Errorf("item %q has %d bytes, want %d", it.Key, len(it.Value), size)
			}
			bytes += len(it.Value)
		}
		if bytes > 4<<20+size {
			t.Errorf("a page holds %d bytes of values, more than 4 MiB and one value", bytes)
		}
		if page.Next == "" {
			break
		}
		if pages > n+1 {
			t.Fatalf("the listing did not end after %d pages", pages)
		}
		after = page.Next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("listed %d keys %v, want %d keys", len(got), got, len(want))
	}
	if pages < 2 {
		t.Errorf("%d values of %d bytes came in one page", n, size)
	}
}

func testListClosed(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	l := lister(t, s)
	mustCreate(t, s, key("k"), "v", c.Now().Add(time.Minute))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.List(context.Background(), key(""), "", 10); !errors.Is(err, store.ErrClosed) {
		t.Errorf("List after Close: error = %v, want ErrClosed", err)
	}
}
