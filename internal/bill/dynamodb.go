// Package bill meters what a call costs in store requests: an HTTP proxy in front of a DynamoDB
// endpoint (moto_server in tests) that records each operation and computes its capacity units by
// DynamoDB's rules, and the list prices that turn units into dollars. `make bench-bill` prints,
// per call kind of Hello World, the requests, units and dollars per million calls
// (docs/performance.md); its test asserts the unit counts so that a regression fails CI.
package bill

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// List prices (us-east-1, on-demand, 2025) in dollars.
const (
	PerMillionWRU        = 0.625        // DynamoDB on-demand write request units
	PerMillionRRU        = 0.125        // DynamoDB on-demand read request units
	PerMillionLambdaReqs = 0.20         // Lambda requests
	LambdaPerMs256MB     = 0.0000000042 // Lambda compute, 1 ms at 256 MB (x86)
)

// Rules of DynamoDB capacity: a write costs 1 unit per started KB of the larger of the item's
// images before and after (at least 1, a failed condition included); a strongly consistent read
// 1 unit per started 4 KB (at least 1, a missing item included), an eventually consistent one
// half of it; an item created in or deleted from a KEYS_ONLY global secondary index costs one
// more write unit (its entry is a few bytes); a write that leaves the index's key attributes as
// they were writes nothing to the index.
const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

// Usage is what the proxy saw: requests per operation and capacity units.
type Usage struct {
	Requests map[string]int
	WCU      float64 // table and index write units
	IndexWCU float64 // the part of WCU spent on the index
	RCU      float64
}

// Total is the number of requests.
func (u Usage) Total() int {
	n := 0
	for _, v := range u.Requests {
		n += v
	}
	return n
}

// Ops renders the requests per operation, in name order ("PutItem 2, UpdateItem 1").
func (u Usage) Ops() string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(u.Requests)) {
		parts = append(parts, fmt.Sprintf("%s %d", op, u.Requests[op]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Dollars is the store's bill per million calls of this usage.
func (u Usage) Dollars() float64 { return u.WCU*PerMillionWRU + u.RCU*PerMillionRRU }

// Sub is u minus v, per operation.
func (u Usage) Sub(v Usage) Usage {
	out := Usage{Requests: map[string]int{}, WCU: u.WCU - v.WCU, IndexWCU: u.IndexWCU - v.IndexWCU, RCU: u.RCU - v.RCU}
	for k, n := range u.Requests {
		if d := n - v.Requests[k]; d != 0 {
			out.Requests[k] = d
		}
	}
	return out
}

// Add is u plus v, per operation.
func (u Usage) Add(v Usage) Usage {
	out := Usage{Requests: maps.Clone(u.Requests), WCU: u.WCU + v.WCU, IndexWCU: u.IndexWCU + v.IndexWCU, RCU: u.RCU + v.RCU}
	if out.Requests == nil {
		out.Requests = map[string]int{}
	}
	for k, n := range v.Requests {
		out.Requests[k] += n
	}
	return out
}

// Per is the usage of one of n calls that used u in all: units divided, requests rounded down.
func (u Usage) Per(n int) Usage {
	out := Usage{Requests: map[string]int{}, WCU: u.WCU / float64(n), IndexWCU: u.IndexWCU / float64(n), RCU: u.RCU / float64(n)}
	for k, r := range u.Requests {
		out.Requests[k] = r / n
	}
	return out
}

// DynamoDB is a metering proxy to a DynamoDB endpoint. To size the item images of a write it
// reads the item before and after it (a strongly consistent GetItem of its own, not counted):
// it meters one client at a time, as the bill test runs.
type DynamoDB struct {
	target *url.URL
	proxy  *httputil.ReverseProxy

	mu    sync.Mutex
	usage Usage
	// index is the attribute that puts an item in the KEYS_ONLY index ("" for none).
	index string
}

// NewDynamoDB returns a proxy to endpoint (http://host:port). Items carrying the attribute index
// are in a KEYS_ONLY global secondary index.
func NewDynamoDB(endpoint, index string) (*DynamoDB, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("bill: endpoint %q: %w", endpoint, err)
	}
	d := &DynamoDB{target: u, proxy: httputil.NewSingleHostReverseProxy(u), index: index, usage: Usage{Requests: map[string]int{}}}
	return d, nil
}

// Usage returns what the proxy counted so far.
func (d *DynamoDB) Usage() Usage {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.usage
	u.Requests = maps.Clone(u.Requests)
	return u
}

// ServeHTTP forwards a request and meters it.
func (d *DynamoDB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	var in request
	_ = json.Unmarshal(body, &in)
	var before []image
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		before = []image{d.read(r, in.TableName, in.key())}
	case "BatchWriteItem":
		for table, reqs := range in.RequestItems {
			for _, wr := range reqs {
				before = append(before, d.read(r, table, wr.key()))
			}
		}
	}
	rec := httptest.NewRecorder() // buffers the answer, so the proxy reads it before the client does
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	d.proxy.ServeHTTP(rec, r)
	var wcu, index, rcu float64
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		after := d.read(r, in.TableName, in.key())
		failed := strings.Contains(rec.Body.String(), "ConditionalCheckFailedException")
		wcu, index = d.write(before[0], after, failed)
	case "BatchWriteItem":
		i := 0
		for table, reqs := range in.RequestItems {
			for _, wr := range reqs {
				after := d.read(r, table, wr.key())
				w, x := d.write(before[i], after, false)
				wcu, index = wcu+w, index+x
				i++
			}
		}
	case "GetItem":
		var out struct{ Item map[string]json.RawMessage }
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		rcu = readUnits(itemSize(out.Item), in.ConsistentRead)
	case "BatchGetItem":
		var out struct {
			Responses map[string][]map[string]json.RawMessage
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		for table, ka := range in.BatchKeys {
			found := len(out.Responses[table])
			for _, it := range out.Responses[table] {
				rcu += readUnits(itemSize(it), ka.ConsistentRead)
			}
			rcu += float64(max(len(ka.Keys)-found, 0)) * readUnits(0, ka.ConsistentRead) // missing items cost the minimum
		}
	case "Query", "Scan":
		var out struct{ Items []map[string]json.RawMessage }
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		size := 0
		for _, it := range out.Items {
			size += itemSize(it)
		}
		rcu = readUnits(size, in.ConsistentRead)
	}
	d.mu.Lock()
	d.usage.Requests[op]++
	d.usage.WCU += wcu
	d.usage.IndexWCU += index
	d.usage.RCU += rcu
	d.mu.Unlock()
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// write is the cost of a write from before to after: table units, and the index units among them.
func (d *DynamoDB) write(before, after image, failed bool) (float64, float64) {
	units := math.Max(1, math.Ceil(float64(max(before.size, after.size))/writeUnitBytes))
	if failed {
		return math.Max(1, math.Ceil(float64(before.size)/writeUnitBytes)), 0
	}
	var index float64
	if d.index != "" && before.indexed != after.indexed {
		index = 1
	}
	return units + index, index
}

// image is an item as the proxy sized it: 0 bytes when absent.
type image struct {
	size    int
	indexed bool
}

// read gets the item under key, uncounted.
func (d *DynamoDB) read(orig *http.Request, table string, key map[string]json.RawMessage) image {
	if key == nil {
		return image{}
	}
	body, _ := json.Marshal(map[string]any{"TableName": table, "Key": key, "ConsistentRead": true})
	req, err := http.NewRequestWithContext(orig.Context(), http.MethodPost, d.target.String(), bytes.NewReader(body))
	if err != nil {
		return image{}
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	if a := orig.Header.Get("Authorization"); a != "" { // moto reads the region and account from it
		req.Header.Set("Authorization", a)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return image{}
	}
	defer resp.Body.Close()
	var out struct{ Item map[string]json.RawMessage }
	if json.NewDecoder(resp.Body).Decode(&out) != nil || out.Item == nil {
		return image{}
	}
	_, indexed := out.Item[d.index]
	return image{size: itemSize(out.Item), indexed: d.index != "" && indexed}
}

func readUnits(size int, consistent bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/readUnitBytes))
	if !consistent {
		u /= 2
	}
	return u
}

// request is what the proxy reads of a request.
type request struct {
	TableName      string
	Item           map[string]json.RawMessage
	Key            map[string]json.RawMessage
	ConsistentRead bool
	RequestItems   map[string][]writeRequest
	BatchKeys      map[string]keysAndAttributes `json:"-"`
}

type writeRequest struct {
	PutRequest    *struct{ Item map[string]json.RawMessage }
	DeleteRequest *struct{ Key map[string]json.RawMessage }
}

type keysAndAttributes struct {
	Keys           []map[string]json.RawMessage
	ConsistentRead bool
}

func (r *request) UnmarshalJSON(b []byte) error {
	type plain request
	var p plain
	var raw struct{ RequestItems json.RawMessage }
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var batch map[string]keysAndAttributes
	if json.Unmarshal(raw.RequestItems, &batch) == nil {
		r.BatchKeys = batch
	}
	_ = json.Unmarshal(b, &p) // RequestItems of a BatchGetItem do not fit writeRequest: kept as BatchKeys
	bk := r.BatchKeys
	*r = request(p)
	r.BatchKeys = bk
	return nil
}

// key is the primary key of the item a single-item request writes (the table's key is "k").
func (r request) key() map[string]json.RawMessage {
	if r.Key != nil {
		return r.Key
	}
	if k, ok := r.Item["k"]; ok {
		return map[string]json.RawMessage{"k": k}
	}
	return nil
}

func (w writeRequest) key() map[string]json.RawMessage {
	switch {
	case w.PutRequest != nil:
		return map[string]json.RawMessage{"k": w.PutRequest.Item["k"]}
	case w.DeleteRequest != nil:
		return w.DeleteRequest.Key
	}
	return nil
}

// itemSize is an item's size by DynamoDB's rules: each attribute's name plus its value.
func itemSize(it map[string]json.RawMessage) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize sizes one attribute value: strings by their UTF-8 bytes, binaries by their decoded
// bytes, numbers by about one byte per two significant digits plus one, booleans and nulls one
// byte, lists and maps 3 bytes plus their elements (and, for maps, the names).
func valueSize(raw json.RawMessage) int {
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return 0
	}
	n := 0
	for typ, x := range v {
		switch typ {
		case "S":
			var s string
			_ = json.Unmarshal(x, &s)
			n += len(s)
		case "N":
			var s string
			_ = json.Unmarshal(x, &s)
			digits := strings.Trim(strings.NewReplacer("-", "", ".", "").Replace(s), "0")
			n += (len(digits)+1)/2 + 1
		case "B":
			var s string
			_ = json.Unmarshal(x, &s)
			b, _ := base64.StdEncoding.DecodeString(s)
			n += len(b)
		case "BOOL", "NULL":
			n++
		case "L":
			var l []json.RawMessage
			_ = json.Unmarshal(x, &l)
			n += 3
			for _, e := range l {
				n += 1 + valueSize(e)
			}
		case "M":
			var m map[string]json.RawMessage
			_ = json.Unmarshal(x, &m)
			n += 3
			for k, e := range m {
				n += 1 + len(k) + valueSize(e)
			}
		case "SS", "NS", "BS":
			var l []string
			_ = json.Unmarshal(x, &l)
			for _, e := range l {
				n += len(e)
			}
		}
	}
	return n
}
