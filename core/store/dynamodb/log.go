package dynamodb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// Logs (store.Log) live in the store's own table, so a deployment needs no second table and no
// index; their keys start with a NUL character, which no store key can hold (kit.CheckKey), so
// records and logs never meet and no prefix listing returns a log item:
//
//	head   k = "\x00log\x00<name>"
//	       ep (S) epoch; seq (N) newest claimed position; at (N) its claim time (Unix ms); tok (S)
//	       its appender's token; pseq, pat (N) the claim before it; keepn, keepage (N) the
//	       retention of the newest claim (count, age in ms); first (N) oldest kept position as
//	       last recorded; gone (N) entries below it are deleted; marks (S) time marks of the age
//	       bound; sum (N) bytes of data claimed so far, psum (N) sum before the newest claim,
//	       keepb (N) the byte bound of the newest claim, bmarks (S) byte marks of the byte bound
//	       (the four absent on a head written before the byte bound: 0); mv (N) version of first,
//	       gone, marks and bmarks
//	entry  k = "\x00log\x00<name>\x00<20 digits>"
//	       d (B) data; at (N); tok (S); ttl (N); tomb (BOOL) for a sealed position
//
// An append is two writes. An UpdateItem claims the next position: it increments seq (an atomic
// counter, so concurrent appenders never retry each other's claims) and returns the head (the
// first append of a log creates the head with a conditional PutItem instead, one more round
// trip once in the log's life, so that a single epoch wins). A
// conditional PutItem then writes the entry where none exists. Retention is computed from the
// head: the oldest kept position is the largest of first, gone, seq - keepn + 1 and what the age
// marks allow at the newest claim's time (so reads agree with appends, and an idle log is not
// trimmed by reading it).
//
// Reclaiming space. A log with an age bound leaves its dropped entries to DynamoDB's TTL sweeper:
// every entry carries ttl = its append time + sweepWindow(MaxAge), which is after the latest time
// retention can still keep it (MaxAge, plus the eighth of MaxAge the marks may be late, plus
// SweepGrace). A TTL deletion costs no write unit, where deleting an entry costs one, as much as
// writing it: the sweeper halves an effect's cost at the bound, and an entry below first that
// waits for it is never read (reads start at first). A log with a count bound alone has no
// ttl to give its entries: when LogReclaimBatch kept-no-longer positions are not yet deleted, an
// append moves gone past them and deletes them with one BatchWriteItem. Either way, when a time
// mark is due or gone moves, an append also updates first, gone and marks (an UpdateItem
// conditional on mv; rare). A read that finds an entry missing whose claim is older than the
// sweep window takes it for swept (a log idle for longer than that, whose retention no later
// claim applied): it is past the retention by the reader's clock, so First moves past it and
// nothing is sealed.
//
// No transaction is used: positions are claimed in order but entries may be written out of
// order. A reader never passes a claimed position whose entry it cannot read: it stops there and
// reads again later. If the appender died between its two writes, the position would block the
// log forever, so a reader that finds it still missing LogGapTimeout after its claim (bounded by
// the append time of any later entry) seals it with a tombstone, under the same "does not exist"
// condition: either the seal or the late entry wins, never both, and an appender that loses to a
// seal claims a new position. So nothing appended is skipped, and nothing is appended twice: the
// claim is conditional on the appender's token not being the newest, so a claim that awsapi
// retries after a lost answer finds its own and claims nothing more.
//
// The age bound uses marks instead of reading entries: when a claim falls in another eighth of
// MaxAge than the previous one, the previous claim's position and time are kept in marks. Every
// entry up to a mark's position was appended no later than the mark's time, so once that time is
// older than MaxAge they all go: an entry goes at most an eighth of MaxAge late. The byte bound
// works the same way on the bytes claimed: a claim adds its data's length to sum, and when sum
// enters another eighth of MaxBytes, the previous claim's position and sum become a byte mark.
// Every entry up to a mark's position ends by the mark's sum, so once MaxBytes of data were
// claimed after it they all go (the claim before the newest bounds its elders the same way): an
// entry goes once the newer entries hold MaxBytes and at most an eighth more. A head written
// before the byte bound counts from 0 at its next claim: the older entries go once MaxBytes of
// newer data are claimed.
//
// A read is a strongly consistent GetItem of the head and a BatchGetItem of the entries (up to
// 100 per request). Waiting polls the head every LogPollInterval (WithLogPollInterval), one
// poller per log in each process with waiters; appends of the same process wake waiters at once.
//
// IAM: besides the store's GetItem, PutItem and DeleteItem, logs need UpdateItem, BatchGetItem and
// BatchWriteItem on the table.

var _ store.Log = (*Store)(nil)

// Log tuning.
const (
	// LogReclaimBatch: positions below first are deleted this many at a time (one BatchWriteItem).
	LogReclaimBatch = 25
	// LogGapTimeout is how long after its claim a missing entry is sealed by readers.
	LogGapTimeout = 10 * time.Second
	// DefaultLogPollInterval is how often a waiting process reads a log's head.
	DefaultLogPollInterval = 250 * time.Millisecond
	// logAppendAttempts bounds the claims of one append (a seal costs one).
	logAppendAttempts = 4
	// logMarkSlots divides MaxAge into the slots of the age marks.
	logMarkSlots = 8
	// logBatchGet is the most keys one BatchGetItem reads.
	logBatchGet = 100
)

// WithLogPollInterval sets how often a process with waiters reads a log's head (default
// DefaultLogPollInterval): the delay before an append of another process is noticed.
func WithLogPollInterval(d time.Duration) Option {
	return func(s *Store) { s.logPoll = d }
}

// logHead is a log's head item.
type logHead struct {
	exists          bool
	epoch, tok      string
	seq, pseq       uint64
	at, pat         int64
	keepn, keepage  int64
	first, gone, mv uint64
	marks           []logMark
	sum, psum       int64
	keepb           int64
	bmarks          []logMark
}

// logMark is a claim kept for retention: its position, and its time (an age mark) or the bytes
// claimed through it (a byte mark).
type logMark struct {
	seq uint64
	at  int64
}

// ddbLogs is the log state of a Store.
type ddbLogs struct {
	heads kit.Heads
	polls kit.Watchers // one head poller per waited-on log
}

func (s *Store) logs() *ddbLogs {
	s.logOnce.Do(func() { s.logState = &ddbLogs{} })
	return s.logState
}

func headKey(name string) string { return "\x00log\x00" + name }

func entryKey(name string, seq uint64) string {
	return fmt.Sprintf("\x00log\x00%s\x00%020d", name, seq)
}

// Wire shapes of log items and requests.
type (
	boolAttr struct {
		BOOL bool
	}
	entryItem struct {
		K    sAttr     `json:"k"`
		D    *bAttr    `json:"d,omitempty"`
		At   nAttr     `json:"at"`
		Tok  sAttr     `json:"tok"`
		Tomb *boolAttr `json:"tomb,omitempty"`
		TTL  *nAttr    `json:"ttl,omitempty"`
	}
	putLogInput struct {
		TableName                           string
		Item                                entryItem
		ConditionExpression                 string
		ExpressionAttributeNames            map[string]string
		ReturnValuesOnConditionCheckFailure string
	}
	updateLogInput struct {
		TableName                           string
		Key                                 keyItem
		UpdateExpression                    string
		ConditionExpression                 string
		ExpressionAttributeNames            map[string]string
		ExpressionAttributeValues           map[string]any
		ReturnValues                        string `json:",omitempty"`
		ReturnValuesOnConditionCheckFailure string `json:",omitempty"`
	}
	attributesOutput struct{ Attributes item }
)

// logNames maps the placeholders of the log expressions to attribute names.
var logNames = map[string]string{
	"#k": AttrKey, "#ep": "ep", "#seq": "seq", "#at": "at", "#tok": "tok", "#pseq": "pseq", "#pat": "pat",
	"#keepn": "keepn", "#keepage": "keepage", "#first": "first", "#gone": "gone", "#marks": "marks", "#mv": "mv",
	"#sum": "sum", "#psum": "psum", "#keepb": "keepb", "#bmarks": "bmarks",
}

// decodeHead parses a head item; nil is a log never appended to.
func decodeHead(it item) (logHead, error) {
	if it == nil {
		return logHead{}, nil
	}
	h := logHead{exists: true}
	var err error
	if h.epoch, err = stringAttr(it, "ep"); err != nil {
		return logHead{}, err
	}
	if h.tok, err = stringAttr(it, "tok"); err != nil {
		return logHead{}, err
	}
	for _, f := range []struct {
		name string
		u    *uint64
		i    *int64
	}{
		{"seq", &h.seq, nil}, {"pseq", &h.pseq, nil}, {"first", &h.first, nil}, {"gone", &h.gone, nil}, {"mv", &h.mv, nil},
		{"at", nil, &h.at}, {"pat", nil, &h.pat}, {"keepn", nil, &h.keepn}, {"keepage", nil, &h.keepage},
	} {
		n, err := numberAttr(it, f.name)
		if err != nil {
			return logHead{}, err
		}
		if f.u != nil {
			*f.u, err = strconv.ParseUint(n, 10, 64)
		} else {
			*f.i, err = strconv.ParseInt(n, 10, 64)
		}
		if err != nil {
			return logHead{}, fmt.Errorf("%w: %s %q", errCorrupt, f.name, n)
		}
	}
	for _, f := range []struct {
		name string
		n    *int64
	}{{"sum", &h.sum}, {"psum", &h.psum}, {"keepb", &h.keepb}} {
		if *f.n, err = optionalNumber(it, f.name); err != nil {
			return logHead{}, err
		}
	}
	if h.marks, err = decodeMarks(it, "marks"); err != nil {
		return logHead{}, err
	}
	if h.bmarks, err = decodeMarks(it, "bmarks"); err != nil {
		return logHead{}, err
	}
	if h.seq == 0 || h.first == 0 || h.gone == 0 || h.gone > h.seq+1 {
		return logHead{}, fmt.Errorf("%w: log head seq %d first %d gone %d", errCorrupt, h.seq, h.first, h.gone)
	}
	return h, nil
}

// decodeMarks reads the marks attribute name: "seq:at,seq:at,…", absent for none.
func decodeMarks(it item, name string) ([]logMark, error) {
	s, err := optionalString(it, name)
	if err != nil {
		return nil, err
	}
	var marks []logMark
	for m := range strings.SplitSeq(s, ",") {
		if m == "" {
			continue
		}
		s, a, _ := strings.Cut(m, ":")
		seq, err1 := strconv.ParseUint(s, 10, 64)
		at, err2 := strconv.ParseInt(a, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: %s mark %q", errCorrupt, name, m)
		}
		marks = append(marks, logMark{seq, at})
	}
	return marks, nil
}

// encodeMarks is what decodeMarks reads.
func encodeMarks(marks []logMark) string {
	parts := make([]string, len(marks))
	for i, m := range marks {
		parts[i] = strconv.FormatUint(m.seq, 10) + ":" + strconv.FormatInt(m.at, 10)
	}
	return strings.Join(parts, ",")
}

// optionalNumber reads the number attribute name, 0 when absent.
func optionalNumber(it item, name string) (int64, error) {
	if _, ok := it[name]; !ok {
		return 0, nil
	}
	n, err := numberAttr(it, name)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q", errCorrupt, name, n)
	}
	return v, nil
}

func stringAttr(it item, name string) (string, error) {
	s, err := optionalString(it, name)
	if err == nil && s == "" {
		err = fmt.Errorf("%w: %q must be a non-empty string", errCorrupt, name)
	}
	return s, err
}

func optionalString(it item, name string) (string, error) {
	raw, err := attrValue(it, name, "S")
	if raw == nil { // absent (no error), or not a string attribute
		return "", err
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%w: %q must be a string", errCorrupt, name)
	}
	return s, nil
}

// slot is the eighth of keepage a time falls in.
func (h logHead) slot(t int64) int64 { return t / max(h.keepage/logMarkSlots, 1) }

// markDue reports whether the newest claim opened a slot: the claim before it becomes a mark.
func (h logHead) markDue() bool {
	return h.keepage > 0 && h.pseq > 0 && h.slot(h.at) != h.slot(h.pat) &&
		(len(h.marks) == 0 || h.marks[len(h.marks)-1].seq < h.pseq)
}

// byteSlot is the eighth of keepb a byte count falls in.
func (h logHead) byteSlot(n int64) int64 { return n / max(h.keepb/logMarkSlots, 1) }

// byteMarkDue reports whether the newest claim's bytes opened a slot: the claim before it
// becomes a byte mark.
func (h logHead) byteMarkDue() bool {
	return h.keepb > 0 && h.pseq > 0 && h.byteSlot(h.sum) != h.byteSlot(h.psum) &&
		(len(h.bmarks) == 0 || h.bmarks[len(h.bmarks)-1].seq < h.pseq)
}

// retained is the head's retention as of the newest claim: the oldest kept position and the
// marks still needed.
type retained struct {
	first         uint64
	marks, bmarks []logMark
}

// kept returns the log's retention as of the newest claim.
func (h logHead) kept() retained {
	first := max(h.first, h.gone)
	if h.keepn > 0 && h.seq >= uint64(h.keepn) {
		first = max(first, h.seq-uint64(h.keepn)+1)
	}
	// below applies a bound by marks: an entry up to a mark (or to the claim before the newest)
	// goes when the mark's value is below cut; due adds the claim before the newest as a mark.
	// The claim before the newest needs no check of its own: below the cut it entered another
	// eighth than the newest (the eighths are narrower than the bound), so it is due, or it is
	// the last mark already.
	below := func(marks []logMark, due bool, prev logMark, cut int64) []logMark {
		all := marks
		if due {
			all = append(append([]logMark(nil), marks...), prev)
		}
		var left []logMark
		for _, m := range all {
			if m.at < cut {
				first = max(first, m.seq+1)
			} else {
				left = append(left, m)
			}
		}
		return left
	}
	r := retained{marks: h.marks, bmarks: h.bmarks}
	if h.keepage > 0 {
		r.marks = below(h.marks, h.markDue(), logMark{h.pseq, h.pat}, h.at-h.keepage)
	}
	if h.keepb > 0 {
		// An entry ending at or before sum - keepb has keepb bytes after it: it goes.
		r.bmarks = below(h.bmarks, h.byteMarkDue(), logMark{h.pseq, h.psum}, h.sum-h.keepb+1)
	}
	r.first = min(first, h.seq)
	return r
}

// AppendLog implements store.Log.
func (s *Store) AppendLog(ctx context.Context, name string, data []byte, keep store.Retention) (store.LogPosition, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogPosition{}, fmt.Errorf("dynamodb: append log: %w", err)
	}
	if err := kit.CheckAppend(name, data, MaxValueSize, keep); err != nil {
		return store.LogPosition{}, fmt.Errorf("dynamodb: append log: %w", err)
	}
	tok := kit.NewEpoch()
	for range logAppendAttempts {
		now := s.now().UnixMilli()
		h, err := s.claim(ctx, name, now, int64(len(data)), keep, tok)
		if err != nil {
			return store.LogPosition{}, fmt.Errorf("dynamodb: append log %q: claim: %w", name, err)
		}
		written, err := s.putEntry(ctx, name, h.seq, data, now, keep, tok)
		if err != nil {
			// The position stays claimed without an entry: readers seal it after LogGapTimeout.
			return store.LogPosition{}, fmt.Errorf("dynamodb: append log %q: entry %d: %w", name, h.seq, err)
		}
		if !written {
			tok = kit.NewEpoch() // a reader sealed the position first: claim another
			continue
		}
		s.maintain(ctx, name, h)
		s.logs().heads.Observe(name, h.epoch, h.seq)
		return store.LogPosition{Epoch: h.epoch, Seq: h.seq}, nil
	}
	return store.LogPosition{}, fmt.Errorf("dynamodb: append log %q: %d claimed positions were sealed before their entries were written (is the clock of this process %s behind?)",
		name, logAppendAttempts, LogGapTimeout)
}

// claim increments the head by one position and size bytes and returns it as it now is. The
// first claim of a log creates its head with a conditional PutItem instead, so that one epoch
// wins even if two appenders start the log at once.
func (s *Store) claim(ctx context.Context, name string, now, size int64, keep store.Retention, tok string) (logHead, error) {
	for range 3 {
		var out attributesOutput
		err := s.api.Call(ctx, "UpdateItem", updateLogInput{
			TableName: s.table,
			Key:       keyItem{sAttr{headKey(name)}},
			UpdateExpression: "SET #pseq = #seq, #pat = #at, #seq = #seq + :one, #at = :now, #tok = :tok, #keepn = :keepn, #keepage = :keepage, " +
				"#psum = if_not_exists(#sum, :zero), #sum = if_not_exists(#sum, :zero) + :size, #keepb = :keepb",
			ConditionExpression:      "attribute_exists(#k) AND #tok <> :tok",
			ExpressionAttributeNames: pick(logNames, "#k", "#pseq", "#seq", "#pat", "#at", "#tok", "#keepn", "#keepage", "#psum", "#sum", "#keepb"),
			ExpressionAttributeValues: map[string]any{
				":one": number(1), ":now": number(now), ":tok": sAttr{tok},
				":keepn": number(int64(keep.MaxCount)), ":keepage": number(keep.MaxAge.Milliseconds()),
				":zero": number(0), ":size": number(size), ":keepb": number(keep.MaxBytes),
			},
			ReturnValues:                        "ALL_NEW",
			ReturnValuesOnConditionCheckFailure: "ALL_OLD",
		}, &out)
		if old, failed := conditionFailed(err); failed {
			if old == nil { // no head yet: create it
				h, created, err := s.createHead(ctx, name, now, size, keep, tok)
				if err != nil || created {
					return h, err
				}
				continue // another appender created it first: claim after its entry
			}
			out.Attributes, err = old, nil // a retry after the first attempt was applied: the head is ours
		}
		if err != nil {
			return logHead{}, err
		}
		h, err := decodeHead(out.Attributes)
		if err == nil && !h.exists {
			err = fmt.Errorf("%w: the claim returned no head", errCorrupt)
		}
		return h, err
	}
	return logHead{}, errors.New("the log's head was created and deleted under this append 3 times")
}

// createHead writes the head of a new log claiming position 1 and size bytes; false when one
// exists.
func (s *Store) createHead(ctx context.Context, name string, now, size int64, keep store.Retention, tok string) (logHead, bool, error) {
	h := logHead{exists: true, epoch: kit.NewEpoch(), tok: tok, seq: 1, at: now, pat: now,
		keepn: int64(keep.MaxCount), keepage: keep.MaxAge.Milliseconds(), first: 1, gone: 1, sum: size, keepb: keep.MaxBytes}
	it := map[string]any{"k": sAttr{headKey(name)}, "ep": sAttr{h.epoch}, "tok": sAttr{tok}}
	for k, v := range map[string]int64{"seq": 1, "at": now, "pseq": 0, "pat": now, "keepn": h.keepn, "keepage": h.keepage, "first": 1, "gone": 1, "mv": 0,
		"sum": size, "psum": 0, "keepb": h.keepb} {
		it[k] = number(v)
	}
	err := s.api.Call(ctx, "PutItem", map[string]any{
		"TableName":                           s.table,
		"Item":                                it,
		"ConditionExpression":                 "attribute_not_exists(#k)",
		"ExpressionAttributeNames":            map[string]string{"#k": AttrKey},
		"ReturnValuesOnConditionCheckFailure": "ALL_OLD",
	}, nil)
	if old, failed := conditionFailed(err); failed {
		cur, err := decodeHead(old)
		if err != nil {
			return logHead{}, false, err
		}
		if cur.exists && cur.tok == tok && cur.seq == 1 {
			return cur, true, nil // a retry after the first attempt was applied
		}
		return logHead{}, false, nil
	}
	if err != nil {
		return logHead{}, false, err
	}
	return h, true, nil
}

// pick returns the entries of m under keys.
func pick(m map[string]string, keys ...string) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// maintain records a due time or byte mark and, in a log without an age bound, when
// LogReclaimBatch positions are no longer kept but not yet deleted, moves gone past them and
// deletes them. It never fails the append: another appender's maintenance may win (its work is
// then done), and what is left is logically gone.
func (s *Store) maintain(ctx context.Context, name string, h logHead) {
	for range 3 {
		r := h.kept()
		gone := h.gone
		if h.keepage <= 0 && r.first-gone >= LogReclaimBatch { // with an age bound, the sweeper reclaims
			gone = r.first
		}
		if gone == h.gone && !h.markDue() && !h.byteMarkDue() {
			return
		}
		var out attributesOutput
		err := s.api.Call(ctx, "UpdateItem", updateLogInput{
			TableName:                s.table,
			Key:                      keyItem{sAttr{headKey(name)}},
			UpdateExpression:         "SET #first = :first, #gone = :gone, #marks = :marks, #bmarks = :bmarks, #mv = :mv1",
			ConditionExpression:      "#mv = :mv0 AND #ep = :ep",
			ExpressionAttributeNames: pick(logNames, "#first", "#gone", "#marks", "#bmarks", "#mv", "#ep"),
			ExpressionAttributeValues: map[string]any{
				":first": number(int64(r.first)), ":gone": number(int64(gone)),
				":marks": sAttr{encodeMarks(r.marks)}, ":bmarks": sAttr{encodeMarks(r.bmarks)},
				":mv0": number(int64(h.mv)), ":mv1": number(int64(h.mv + 1)), ":ep": sAttr{h.epoch},
			},
			ReturnValuesOnConditionCheckFailure: "ALL_OLD",
		}, &out)
		if old, failed := conditionFailed(err); failed {
			if h, err = decodeHead(old); err != nil || !h.exists {
				return
			}
			continue // another maintenance won: redo it on the current head
		}
		if err != nil {
			return
		}
		if gone > h.gone {
			s.deleteEntries(ctx, name, h.gone, gone)
		}
		return
	}
}

// sweepWindow is how long after its append an entry of a log with age bound keepage (in ms)
// may be swept: after the latest time retention keeps it (keepage, plus the slot of the marks,
// which may drop it that much late), plus SweepGrace. 0 for a log without an age bound.
func sweepWindow(keepage int64) int64 {
	if keepage <= 0 {
		return 0
	}
	return keepage + keepage/logMarkSlots + SweepGrace.Milliseconds()
}

// putEntry writes the entry of a claimed position; false when a reader sealed it first.
func (s *Store) putEntry(ctx context.Context, name string, seq uint64, data []byte, at int64, keep store.Retention, tok string) (bool, error) {
	it := entryItem{K: sAttr{entryKey(name, seq)}, D: &bAttr{data}, At: number(at), Tok: sAttr{tok}}
	if it.D.B == nil {
		it.D.B = []byte{}
	}
	if w := sweepWindow(keep.MaxAge.Milliseconds()); w > 0 {
		ttl := number((at+w)/1000 + 1)
		it.TTL = &ttl
	}
	err := s.api.Call(ctx, "PutItem", putLogInput{
		TableName:                           s.table,
		Item:                                it,
		ConditionExpression:                 "attribute_not_exists(#k)",
		ExpressionAttributeNames:            map[string]string{"#k": AttrKey},
		ReturnValuesOnConditionCheckFailure: "ALL_OLD",
	}, nil)
	if old, failed := conditionFailed(err); failed {
		t, _ := optionalString(old, "tok")
		return t == tok, nil // our own write, retried after a lost answer; or a seal
	}
	return err == nil, err
}

// deleteEntries deletes the entries [from, to) with one BatchWriteItem per 25, retrying what
// DynamoDB leaves unprocessed once. It never fails the append: what stays is logically gone
// already (below first) and carries a ttl.
func (s *Store) deleteEntries(ctx context.Context, name string, from, to uint64) {
	type deleteRequest struct {
		DeleteRequest struct{ Key keyItem }
	}
	for start := from; start < to; start += LogReclaimBatch {
		var reqs []deleteRequest
		for seq := start; seq < min(to, start+LogReclaimBatch); seq++ {
			var r deleteRequest
			r.DeleteRequest.Key = keyItem{sAttr{entryKey(name, seq)}}
			reqs = append(reqs, r)
		}
		for range 2 {
			var out struct {
				UnprocessedItems map[string][]deleteRequest
			}
			in := map[string]any{"RequestItems": map[string][]deleteRequest{s.table: reqs}}
			if s.api.Call(ctx, "BatchWriteItem", in, &out) != nil {
				break
			}
			if reqs = out.UnprocessedItems[s.table]; len(reqs) == 0 {
				break
			}
		}
	}
}

// getHead reads a log's head with a strongly consistent read.
func (s *Store) getHead(ctx context.Context, name string) (logHead, error) {
	var out itemOutput
	err := s.api.Call(ctx, "GetItem", getItemInput{TableName: s.table, Key: keyItem{sAttr{headKey(name)}}, ConsistentRead: true}, &out)
	if err != nil {
		return logHead{}, err
	}
	return decodeHead(out.Item)
}

// ReadLog implements store.Log.
func (s *Store) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogRange{}, fmt.Errorf("dynamodb: read log: %w", err)
	}
	limit, err := kit.CheckRead(name, limit)
	if err != nil {
		return store.LogRange{}, fmt.Errorf("dynamodb: read log: %w", err)
	}
	h, err := s.getHead(ctx, name)
	if err != nil {
		return store.LogRange{}, fmt.Errorf("dynamodb: read log %q: %w", name, err)
	}
	r := store.LogRange{First: 1, Through: after}
	if !h.exists {
		return r, nil
	}
	s.logs().heads.Observe(name, h.epoch, h.seq)
	first := h.kept().first
	r.Epoch, r.First, r.Last = h.epoch, first, h.seq
	if limit == 0 {
		return r, nil
	}
	if after >= h.seq {
		return r, nil
	}
	var lastRead uint64
	from := max(after+1, first)
	to := min(h.seq, max(after, first-1)+uint64(limit))
	for from <= to && len(r.Entries) < limit {
		batchEnd := min(to, from+logBatchGet-1)
		got, err := s.getEntries(ctx, name, from, batchEnd)
		if err != nil {
			return store.LogRange{}, fmt.Errorf("dynamodb: read log %q: %w", name, err)
		}
		stop := false
		for seq := from; seq <= batchEnd; seq++ {
			e, ok := got[seq]
			if !ok {
				// Missing: still being written, sealed if its claim is old, or deleted since the
				// head was read.
				e, ok, stop, err = s.missing(ctx, name, seq, got, batchEnd, h, &r)
				if err != nil {
					return store.LogRange{}, fmt.Errorf("dynamodb: read log %q: %w", name, err)
				}
				if stop {
					break
				}
			}
			lastRead = seq
			if ok && !e.tomb {
				r.Entries = append(r.Entries, e.LogEntry)
			}
		}
		if stop {
			break
		}
		from = batchEnd + 1
	}
	r.Through = kit.Through(after, lastRead, r.First, r.Last)
	return r, nil
}

// readEntry is an entry as read: a tombstone holds no entry.
type readEntry struct {
	store.LogEntry
	tomb bool
}

// missing handles a claimed position whose entry a read did not find. It reports the entry when
// it has appeared meanwhile, stop when the read must end before it (still being written, or
// deleted by retention: r.First then moves), or neither when it sealed the position.
func (s *Store) missing(ctx context.Context, name string, seq uint64, got map[uint64]readEntry, batchEnd uint64, h logHead, r *store.LogRange) (readEntry, bool, bool, error) {
	claimedBy := h.at // the position was claimed no later than any later claim
	for later := seq + 1; later <= batchEnd; later++ {
		if e, ok := got[later]; ok {
			claimedBy = e.At.UnixMilli()
			break
		}
	}
	now := s.now().UnixMilli()
	if w := sweepWindow(h.keepage); w > 0 && claimedBy < now-w {
		// Swept: past the retention by this reader's clock (see the package doc). Swept entries
		// are the oldest, so they lead the range: First moves past them.
		if len(r.Entries) == 0 {
			r.First = max(r.First, seq+1)
		}
		return readEntry{tomb: true}, true, false, nil
	}
	if now-claimedBy < LogGapTimeout.Milliseconds() {
		return readEntry{}, false, true, nil
	}
	cur, err := s.getHead(ctx, name)
	if err != nil {
		return readEntry{}, false, false, err
	}
	if cur.epoch != h.epoch {
		// The log was reset (or deleted) after the head was read: its positions are another log's
		// now. The read ends here; the next one starts in the new log.
		return readEntry{}, false, true, nil
	}
	if curFirst := cur.kept().first; seq < curFirst {
		r.First = curFirst // deleted by retention after the head was read
		return readEntry{}, false, true, nil
	}
	seal := entryItem{K: sAttr{entryKey(name, seq)}, At: number(s.now().UnixMilli()), Tok: sAttr{"seal"}, Tomb: &boolAttr{true}}
	ttl := number(s.now().Unix() + int64(SweepGrace/time.Second))
	seal.TTL = &ttl
	err = s.api.Call(ctx, "PutItem", putLogInput{
		TableName:                           s.table,
		Item:                                seal,
		ConditionExpression:                 "attribute_not_exists(#k)",
		ExpressionAttributeNames:            map[string]string{"#k": AttrKey},
		ReturnValuesOnConditionCheckFailure: "ALL_OLD",
	}, nil)
	if old, failed := conditionFailed(err); failed {
		e, err := decodeEntry(old)
		e.Seq = seq
		return e, err == nil, false, err // it was written meanwhile
	}
	if err != nil {
		return readEntry{}, false, false, err
	}
	return readEntry{tomb: true}, true, false, nil
}

// getEntries reads the entries [from, to] with BatchGetItem.
func (s *Store) getEntries(ctx context.Context, name string, from, to uint64) (map[uint64]readEntry, error) {
	type keysAndAttributes struct {
		Keys           []keyItem
		ConsistentRead bool
	}
	var keys []keyItem
	asked := map[string]uint64{} // an entry's position is the one its key was asked for
	for seq := from; seq <= to; seq++ {
		k := entryKey(name, seq)
		keys, asked[k] = append(keys, keyItem{sAttr{k}}), seq
	}
	out := map[uint64]readEntry{}
	for attempt := 0; len(keys) > 0; attempt++ {
		if attempt == 5 {
			return nil, errors.New("BatchGetItem left keys unprocessed 5 times")
		}
		var resp struct {
			Responses       map[string][]item
			UnprocessedKeys map[string]keysAndAttributes
		}
		in := map[string]any{"RequestItems": map[string]keysAndAttributes{s.table: {Keys: keys, ConsistentRead: true}}}
		if err := s.api.Call(ctx, "BatchGetItem", in, &resp); err != nil {
			return nil, err
		}
		for _, it := range resp.Responses[s.table] {
			k, err := optionalString(it, AttrKey)
			if err != nil {
				return nil, err
			}
			seq, ok := asked[k]
			if !ok {
				return nil, fmt.Errorf("%w: log entry key %q", errCorrupt, k)
			}
			e, err := decodeEntry(it)
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", seq, err)
			}
			e.Seq = seq
			out[seq] = e
		}
		keys = resp.UnprocessedKeys[s.table].Keys
	}
	return out, nil
}

// decodeEntry decodes an entry's item, all but its position: the caller knows it (the key it
// asked for), and an item at a key it did not ask for is not an entry it may take.
func decodeEntry(it item) (readEntry, error) {
	var e readEntry
	at, err := numberAttr(it, "at")
	if err != nil {
		return e, err
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return e, fmt.Errorf("%w: at %q", errCorrupt, at)
	}
	e.At = kit.Time(ms)
	if raw, _ := attrValue(it, "tomb", "BOOL"); raw != nil {
		e.tomb = string(raw) == "true"
	}
	if raw, err := attrValue(it, "d", "B"); err != nil {
		return e, err
	} else if raw != nil && json.Unmarshal(raw, &e.Data) != nil {
		return e, fmt.Errorf("%w: data is not base64", errCorrupt)
	}
	if e.Data == nil {
		e.Data = []byte{}
	}
	return e, nil
}

// WaitLog implements store.Log: the first waiter of a process on a log starts a poller that
// reads the head every poll interval while anyone waits.
func (s *Store) WaitLog(ctx context.Context, name string, after uint64) error {
	if err := s.logReady(ctx); err != nil {
		return fmt.Errorf("dynamodb: wait log: %w", err)
	}
	if err := kit.CheckLogName(name); err != nil {
		return fmt.Errorf("dynamodb: wait log: %w", err)
	}
	l := s.logs()
	err := l.heads.Wait(ctx, name, after, l.polls.Watch(s.poll))
	if err != nil {
		return fmt.Errorf("dynamodb: wait log: %w", err)
	}
	return nil
}

func (s *Store) poll(ctx context.Context, name string) {
	interval := s.logPoll
	if interval <= 0 {
		interval = DefaultLogPollInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for ctx.Err() == nil && !s.closed.Load() {
		if h, err := s.getHead(ctx, name); err == nil {
			if h.exists {
				s.logs().heads.Observe(name, h.epoch, h.seq)
			} else {
				s.logs().heads.Observe(name, "", 0)
			}
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

func (s *Store) logReady(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}
