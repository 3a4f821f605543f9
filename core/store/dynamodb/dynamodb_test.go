package dynamodb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

const secretKey = "moto-secret-key-never-printed"

func env(kv ...string) func(string) string {
	m := make(map[string]string)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// trips counts HTTP requests, one per round trip (retries included).
type trips struct{ n atomic.Int64 }

func (tr *trips) Do(req *http.Request) (*http.Response, error) {
	tr.n.Add(1)
	return http.DefaultClient.Do(req)
}

func client(t testing.TB, endpoint string, opts ...awsapi.Option) *awsapi.Client {
	t.Helper()
	c, err := dynamodb.NewClient(env("AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", secretKey, "AWS_REGION", "us-east-1",
		"AWS_ENDPOINT_URL_DYNAMODB", endpoint), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func deleteTable(t testing.TB, c *awsapi.Client, name string) {
	if err := c.Call(context.Background(), "DeleteTable", map[string]string{"TableName": name}, nil); err != nil {
		t.Errorf("delete table %s: %v", name, err)
	}
}

// table creates a fresh table with CreateTable and deletes it when the test ends.
func table(t testing.TB, c *awsapi.Client) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "svz-store-test-" + hex.EncodeToString(b)
	if err := dynamodb.CreateTable(context.Background(), c, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteTable(t, c, name) })
	return name
}

func open(t testing.TB, c *awsapi.Client, name string, opts ...dynamodb.Option) *dynamodb.Store {
	t.Helper()
	s, err := dynamodb.New(context.Background(), c, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	c := client(t, endpoint, awsapi.WithHTTPClient(&testenv.MotoWrites{}))
	name := table(t, c)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t testing.TB, now func() time.Time) store.Store {
		return open(t, c, name, dynamodb.WithClock(now))
	}, storetest.Network(storetest.Remote{Addr: u.Host,
		Open: func(t testing.TB, now func() time.Time, addr string, timeout time.Duration) store.Store {
			return open(t, client(t, "http://"+addr), name, dynamodb.WithClock(now), dynamodb.WithTimeout(timeout))
		}}))
}

func want(target error) func(error) error {
	return func(err error) error {
		if errors.Is(err, target) {
			return nil
		}
		return fmt.Errorf("want %v, got %w", target, err)
	}
}

func TestOneRoundTripPerCall(t *testing.T) {
	var tr trips
	c := client(t, testenv.Need(t, testenv.AWSEndpoint), awsapi.WithHTTPClient(&tr))
	s := open(t, c, table(t, c))
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	var r store.Record
	var err error
	calls := []struct {
		name string
		call func(k string) error
	}{
		{"Create", func(k string) error { r, err = s.Create(ctx, k, []byte("claim"), exp); return err }},
		{"Create of a live key", func(k string) error { _, err := s.Create(ctx, k, []byte("x"), exp); return want(store.ErrExists)(err) }},
		{"Get", func(k string) error { r, err = s.Get(ctx, k); return err }},
		{"Update", func(k string) error { r, err = s.Update(ctx, k, r.Version, []byte("done"), exp); return err }},
		{"Update with a stale version", func(k string) error {
			_, err := s.Update(ctx, k, r.Version+1, []byte("x"), exp)
			return want(store.ErrConflict)(err)
		}},
		{"Update of a missing key", func(string) error {
			_, err := s.Update(ctx, "rt/missing", 1, []byte("x"), exp)
			return want(store.ErrNotFound)(err)
		}},
		{"Delete with a stale version", func(k string) error { return want(store.ErrConflict)(s.Delete(ctx, k, r.Version+1)) }},
		{"Delete", func(k string) error { return s.Delete(ctx, k, r.Version) }},
	}
	for _, c := range calls {
		before := tr.n.Load()
		if err := c.call("rt/k"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := tr.n.Load() - before; got != 1 {
			t.Errorf("%s took %d round trips, want 1", c.name, got)
		}
	}
}

// lossy forwards requests to moto but loses the answer to the first request of each operation
// in lose, after moto applied it: the client sees a transport error and retries.
type lossy struct {
	lose map[string]bool
	lost atomic.Int64
	sent atomic.Int64
}

func (l *lossy) Do(req *http.Request) (*http.Response, error) {
	l.sent.Add(1)
	resp, err := http.DefaultClient.Do(req)
	op := strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	if err == nil && l.lose[op] {
		delete(l.lose, op) // only the first; requests of one test are sequential
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l.lost.Add(1)
		return nil, fmt.Errorf("read tcp: connection reset by peer (answer to %s lost)", op)
	}
	return resp, err
}

// TestLostAnswersAreRetriedSafely: a write applied by DynamoDB whose answer is lost is retried,
// finds its condition failed by its own effect, and still succeeds, as it did.
func TestLostAnswersAreRetriedSafely(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	admin := client(t, endpoint)
	name := table(t, admin)
	l := &lossy{lose: map[string]bool{}}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(l), awsapi.WithRetries(3, time.Millisecond)), name)
	other := open(t, admin, name)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)

	l.lose["PutItem"] = true
	created, err := s.Create(ctx, "lost/k", []byte("claim"), exp)
	if err != nil || l.lost.Load() != 1 {
		t.Fatalf("Create with a lost answer: %v (%d lost)", err, l.lost.Load())
	}
	if got, err := other.Get(ctx, "lost/k"); err != nil || got.Version != created.Version || string(got.Value) != "claim" {
		t.Fatalf("Get after Create: %+v %v", got, err)
	}

	l.lose["PutItem"] = true
	updated, err := s.Update(ctx, "lost/k", created.Version, []byte("done"), exp)
	if err != nil || l.lost.Load() != 2 || updated.Version == created.Version {
		t.Fatalf("Update with a lost answer: %+v %v (%d lost)", updated, err, l.lost.Load())
	}
	if got, err := other.Get(ctx, "lost/k"); err != nil || got.Version != updated.Version || string(got.Value) != "done" {
		t.Fatalf("Get after Update: %+v %v", got, err)
	}

	l.lose["DeleteItem"] = true
	if err := s.Delete(ctx, "lost/k", updated.Version); err != nil || l.lost.Load() != 3 {
		t.Fatalf("Delete with a lost answer: %v (%d lost)", err, l.lost.Load())
	}
	if _, err := other.Get(ctx, "lost/k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}

	// Someone else's record is still told apart from a lost answer of one's own.
	theirs, err := other.Create(ctx, "lost/k", []byte("theirs"), exp)
	if err != nil {
		t.Fatal(err)
	}
	l.lose["PutItem"] = true
	cur, err := s.Create(ctx, "lost/k", []byte("mine"), exp)
	if !errors.Is(err, store.ErrExists) || cur.Version != theirs.Version || string(cur.Value) != "theirs" {
		t.Fatalf("Create over another's record: %+v %v", cur, err)
	}
	l.lose["PutItem"] = true
	if _, err := s.Update(ctx, "lost/k", theirs.Version+1, []byte("mine"), exp); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale Update: %v", err)
	}
}

// TestLayout pins the documented item layout, which operators and IAM policies rely on.
func TestLayout(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	s := open(t, c, name)
	ctx := context.Background()
	exp := time.UnixMilli(time.Now().Add(time.Minute).UnixMilli())
	r, err := s.Create(ctx, "layout/k", []byte{0, 1, 2}, exp)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Item map[string]map[string]string }
	err = c.Call(ctx, "GetItem", map[string]any{"TableName": name, "ConsistentRead": true, "Key": map[string]any{"k": map[string]string{"S": "layout/k"}}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"k":   {"S": "layout/k"},
		"ix":  {"S": "0"},
		"v":   {"B": "AAEC"},
		"ver": {"N": strconv.FormatUint(r.Version, 10)},
		"exp": {"N": strconv.FormatInt(exp.UnixMilli(), 10)},
		"ttl": {"N": strconv.FormatInt(exp.Unix()+1+3600, 10)},
	}
	if fmt.Sprint(out.Item) != fmt.Sprint(want) {
		t.Errorf("item = %v\nwant   %v", out.Item, want)
	}

	var ttl struct {
		TimeToLiveDescription struct{ AttributeName, TimeToLiveStatus string }
	}
	if err := c.Call(ctx, "DescribeTimeToLive", map[string]string{"TableName": name}, &ttl); err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d.AttributeName != "ttl" || d.TimeToLiveStatus != "ENABLED" {
		t.Errorf("TTL description = %+v, want enabled on ttl", d)
	}
}

func TestNewErrors(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	c := client(t, endpoint)
	ctx := context.Background()

	_, err := dynamodb.New(ctx, c, "svz-no-such-table")
	if want := `dynamodb: table "svz-no-such-table" does not exist (create it with partition key "k" of type S)`; err == nil || err.Error() != want {
		t.Errorf("missing table: error = %v, want %q", err, want)
	}

	if _, err := dynamodb.New(ctx, c, ""); err == nil || err.Error() != "dynamodb: no table name" {
		t.Errorf("empty table name: error = %v", err)
	}

	wrong := "svz-store-test-wrong-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	err = c.Call(ctx, "CreateTable", json.RawMessage(`{"TableName":"`+wrong+`","BillingMode":"PAY_PER_REQUEST",`+
		`"AttributeDefinitions":[{"AttributeName":"id","AttributeType":"S"}],"KeySchema":[{"AttributeName":"id","KeyType":"HASH"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer deleteTable(t, c, wrong)
	_, err = dynamodb.New(ctx, c, wrong)
	if want := `dynamodb: table "` + wrong + `": its key schema must be exactly partition key "k"`; err == nil || err.Error() != want {
		t.Errorf("wrong schema: error = %v, want %q", err, want)
	}

	if err := dynamodb.CreateTable(ctx, c, wrong); err == nil || !strings.HasPrefix(err.Error(), `dynamodb: create table "`+wrong+`": ResourceInUseException: `) {
		t.Errorf("CreateTable of an existing table: %v", err)
	}
}

func TestUnreachableEndpointLeaksNoSecret(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = dynamodb.New(ctx, client(t, "http://"+addr), "svz-store")
	if err == nil {
		t.Fatal("New succeeded against a closed port")
	}
	if !strings.HasPrefix(err.Error(), `dynamodb: cannot reach table "svz-store": `) || !strings.Contains(err.Error(), addr) {
		t.Errorf("error = %q, want it to name the table and %s", err, addr)
	}
	if strings.Contains(err.Error(), secretKey) {
		t.Errorf("error leaks the secret key: %q", err)
	}
}

// TestContainerCredentials runs the store with the credentials of a container credentials
// endpoint (App Runner, ECS), fetched once for many calls.
func TestContainerCredentials(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	var fetches atomic.Int32
	creds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "pod-identity-token" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		fetches.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]string{"AccessKeyId": "test", "SecretAccessKey": secretKey, "Token": "session",
			"Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}))
	defer creds.Close()
	var tr trips
	c, err := dynamodb.NewClient(env("AWS_REGION", "us-east-1", "AWS_ENDPOINT_URL", endpoint,
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", creds.URL+"/v1/credentials", "AWS_CONTAINER_AUTHORIZATION_TOKEN", "pod-identity-token"),
		awsapi.WithHTTPClient(&tr))
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, c, table(t, client(t, endpoint)))
	ctx := context.Background()
	r, err := s.Create(ctx, "creds/k", []byte("v"), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "creds/k"); err != nil || got.Version != r.Version {
		t.Fatalf("%+v %v", got, err)
	}
	if fetches.Load() != 1 || tr.n.Load() != 4 { // one fetch, DescribeTable, PutItem, GetItem
		t.Fatalf("%d fetches, %d requests", fetches.Load(), tr.n.Load())
	}
}

func BenchmarkStore(b *testing.B) {
	var tr trips
	c := client(b, testenv.Need(b, testenv.AWSEndpoint), awsapi.WithHTTPClient(&tr))
	s := open(b, c, table(b, c))
	storetest.Benchmark(b, s, tr.n.Load)
}

// TestListNeedsTheIndex: a table made before the index existed serves every call but List, which
// names the index to add; once it is added, List works without a restart, and lists the records
// written meanwhile (they carry the index key).
func TestListNeedsTheIndex(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	ctx := context.Background()
	name := "svz-store-test-old-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	err := c.Call(ctx, "CreateTable", json.RawMessage(`{"TableName":"`+name+`","BillingMode":"PAY_PER_REQUEST",`+
		`"AttributeDefinitions":[{"AttributeName":"k","AttributeType":"S"}],"KeySchema":[{"AttributeName":"k","KeyType":"HASH"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteTable(t, c, name) })
	s := open(t, c, name)
	r, err := s.Create(ctx, "old/k", []byte("v"), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.List(ctx, "old/", "", 10)
	want := `dynamodb: list: table "` + name + `" has no active global secondary index "svz-keys" (partition key "ix" of type S, sort key "k" of type S, projection KEYS_ONLY): add it to list records`
	if err == nil || err.Error() != want {
		t.Fatalf("List without the index: error = %v\nwant %s", err, want)
	}
	err = c.Call(ctx, "UpdateTable", json.RawMessage(`{"TableName":"`+name+`",`+
		`"AttributeDefinitions":[{"AttributeName":"k","AttributeType":"S"},{"AttributeName":"ix","AttributeType":"S"}],`+
		`"GlobalSecondaryIndexUpdates":[{"Create":{"IndexName":"svz-keys","KeySchema":[{"AttributeName":"ix","KeyType":"HASH"},{"AttributeName":"k","KeyType":"RANGE"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var page store.Page
	deadline := time.Now().Add(time.Minute)
	for page, err = s.List(ctx, "old/", "", 10); err != nil; page, err = s.List(ctx, "old/", "", 10) {
		if time.Now().After(deadline) {
			t.Fatalf("List a minute after the index was added: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(page.Items) != 1 || page.Items[0].Key != "old/k" || page.Items[0].Version != r.Version {
		t.Errorf("List after adding the index = %+v", page)
	}
}

// TestUnlisted: a record under a WithUnlisted prefix carries no ix, before and after an Update,
// so it never enters the index; other records do; a listing that could hold unlisted keys is
// refused instead of answered without them.
func TestUnlisted(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	s := open(t, c, name, dynamodb.WithUnlisted("idem/"))
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	hasIx := func(key string) bool {
		t.Helper()
		var out struct{ Item map[string]map[string]string }
		err := c.Call(ctx, "GetItem", map[string]any{"TableName": name, "ConsistentRead": true, "Key": map[string]any{"k": map[string]string{"S": key}}}, &out)
		if err != nil || out.Item == nil {
			t.Fatalf("GetItem %q: %v, %v", key, out.Item, err)
		}
		_, ok := out.Item["ix"]
		return ok
	}
	r, err := s.Create(ctx, "idem/a", []byte("1"), exp)
	if err != nil {
		t.Fatal(err)
	}
	if hasIx("idem/a") {
		t.Error("an unlisted record was created in the index")
	}
	if _, err := s.Update(ctx, "idem/a", r.Version, []byte("2"), exp); err != nil {
		t.Fatal(err)
	}
	if hasIx("idem/a") {
		t.Error("an unlisted record entered the index on Update")
	}
	if got, err := s.Get(ctx, "idem/a"); err != nil || string(got.Value) != "2" {
		t.Fatalf("Get = %q, %v", got.Value, err)
	}
	for _, k := range []string{"idem", "idemx/b", "other/c"} {
		if _, err := s.Create(ctx, k, []byte(k), exp); err != nil {
			t.Fatal(err)
		}
		if !hasIx(k) {
			t.Errorf("listed record %q is not in the index", k)
		}
	}
	for _, prefix := range []string{"i", "idem", "idem/", "idem/a"} {
		if _, err := s.List(ctx, prefix, "", 10); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("List(%q) = %v, want ErrInvalid", prefix, err)
		}
	}
	for prefix, want := range map[string]string{"idemx": "idemx/b", "other/": "other/c"} {
		p, err := s.List(ctx, prefix, "", 10)
		if err != nil || len(p.Items) != 1 || p.Items[0].Key != want {
			t.Errorf("List(%q) = %+v, %v; want %s", prefix, p, err, want)
		}
	}
}
