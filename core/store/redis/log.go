package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// Logs (store.Log) are Redis streams. The log name n has two keys sharing one hash tag (so one
// script may touch both, on Redis Cluster too), tag = the first 16 hex digits of SHA-256(n):
//
//	svz:log:{tag}:n:h   hash: ep (epoch), seq (newest position), b (bytes of data ever appended)
//	svz:log:{tag}:n:s   stream: entry ids "<position>-0", fields d (data), t (append time in
//	                    Unix ms), k (the appender's random token), s (b before the entry; an
//	                    entry written before b was kept has none, and counts from 0)
//
// An append is one script, hence one round trip and atomic: Redis runs scripts one at a time, so
// positions are given in commit order. The script trims the stream (MAXLEN for the count, MINID
// after checking the oldest entries' times for the age and their s for the byte bound, at most
// LogReclaimBatch of them, never the new entry) and
// first checks the newest entries for its token, so that a command the client retried after a
// lost answer appends nothing twice. The keys have no Redis expiry: retention bounds them, so the
// server must not evict them (no allkeys-* maxmemory policy, as for the store's records). A read
// is one script. Each process that waits on a log runs one blocking XREAD on its stream.

var (
	_ store.Log            = (*Store)(nil)
	_ store.UpdateAppender = (*Store)(nil)
)

// LogReclaimBatch bounds the entries whose age one append checks.
const LogReclaimBatch = 64

// appendLogBody appends to a log: K = {stream, head}, A = {data, now_ms, max_count (0: none),
// cutoff_ms ("": none), epoch of a new log, token, reclaim batch, max_bytes (0: none)}. Returns
// {epoch, position}.
const appendLogBody = `
local recent = redis.call('XREVRANGE', K[1], '+', '-', 'COUNT', 4)
for _, e in ipairs(recent) do
	local f = e[2]
	for i = 1, #f, 2 do
		if f[i] == 'k' and f[i + 1] == A[6] then
			return {redis.call('HGET', K[2], 'ep'), tonumber(string.match(e[1], '^(%d+)'))}
		end
	end
end
local seq = redis.call('HINCRBY', K[2], 'seq', 1)
if seq == 1 then
	redis.call('DEL', K[1])
	redis.call('HSET', K[2], 'ep', A[5])
end
local ep = redis.call('HGET', K[2], 'ep')
local b = redis.call('HINCRBY', K[2], 'b', #A[1])
local id = string.format('%d-0', seq)
if tonumber(A[3]) > 0 then
	redis.call('XADD', K[1], 'MAXLEN', A[3], id, 'd', A[1], 't', A[2], 'k', A[6], 's', b - #A[1])
else
	redis.call('XADD', K[1], id, 'd', A[1], 't', A[2], 'k', A[6], 's', b - #A[1])
end
local function field(e, name)
	for i = 1, #e[2], 2 do
		if e[2][i] == name then return tonumber(e[2][i + 1]) end
	end
	return 0
end
-- An entry goes when it is older than the age bound, or starts more than max_bytes before the
-- head's b; never the new one.
local cutoff, bytecut = nil, nil
if A[4] ~= '' then cutoff = tonumber(A[4]) end
if tonumber(A[8]) > 0 then bytecut = b - tonumber(A[8]) end
local function gone(e)
	return (cutoff and field(e, 't') < cutoff) or (bytecut and field(e, 's') < bytecut)
end
local oldest = redis.call('XRANGE', K[1], '-', '+', 'COUNT', 1)
if #oldest > 0 and oldest[1][1] ~= id and gone(oldest[1]) then
	local old = redis.call('XRANGE', K[1], '-', '+', 'COUNT', A[7])
	local minid = nil
	for _, e in ipairs(old) do
		if e[1] == id or not gone(e) then
			minid = e[1]
			break
		end
		minid = string.format('%d-0', tonumber(string.match(e[1], '^(%d+)')) + 1)
	end
	redis.call('XTRIM', K[1], 'MINID', minid)
end
return {ep, seq}`

// appendLogScript: KEYS stream, head; ARGV as A of appendLogBody.
const appendLogScript = `local K, A = KEYS, ARGV` + appendLogBody

// updateAppendScript: updateScript's, then, only when it wrote, appendLogBody's; one script, so
// both happen or neither. KEYS record, index, stream, head. ARGV updateScript's 7, then
// appendLogBody's 8. Returns updateScript's answer (a retry that finds its own version appends
// nothing), with the appended {epoch, position} after a 1 that wrote.
const updateAppendScript = `
local cur = redis.call('HMGET', KEYS[1], 'ver', 'exp')
if not cur[1] or tonumber(cur[2]) <= tonumber(ARGV[5]) then
	return {0}
end
if cur[1] == ARGV[3] then return {1} end
if cur[1] ~= ARGV[1] then
	return {-1}
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'ver', ARGV[3], 'exp', ARGV[4])
if tonumber(ARGV[6]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[6]) else redis.call('PERSIST', KEYS[1]) end
redis.call('ZADD', KEYS[2], 0, ARGV[7])
local K, A = {KEYS[3], KEYS[4]}, {ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15]}
local appended = (function()` + appendLogBody + `end)()
return {1, appended[1], appended[2]}`

// readLogScript: KEYS stream, head. ARGV after, limit. Returns {} for a log never appended to,
// else {epoch, last, first, entries}.
const readLogScript = `
local h = redis.call('HMGET', KEYS[2], 'ep', 'seq')
if not h[1] then return {} end
local first = tonumber(h[2]) + 1
local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #oldest > 0 then first = tonumber(string.match(oldest[1][1], '^(%d+)')) end
local entries = {}
if tonumber(ARGV[2]) > 0 then
	entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1] .. '-0', '+', 'COUNT', ARGV[2])
end
return {h[1], h[2], first, entries}`

// redisLogs is the log state of a Store.
type redisLogs struct {
	append, read, updateAppend *goredis.Script
	heads                      kit.Heads
	watches                    kit.Watchers // one XREAD loop per waited-on log
}

// logs returns the log state, created on first use (New is not changed by logs).
func (s *Store) logs() *redisLogs {
	s.logOnce.Do(func() {
		s.logState = &redisLogs{
			append:       goredis.NewScript(appendLogScript),
			updateAppend: goredis.NewScript(updateAppendScript),
			read:         goredis.NewScript(readLogScript),
		}
	})
	return s.logState
}

// logKeys returns the stream and head keys of the log name.
func logKeys(name string) (stream, head string) {
	sum := sha256.Sum256([]byte(name))
	base := "svz:log:{" + hex.EncodeToString(sum[:8]) + "}:" + name
	return base + ":s", base + ":h"
}

// AppendLog implements store.Log in one round trip.
func (s *Store) AppendLog(ctx context.Context, name string, data []byte, keep store.Retention) (store.LogPosition, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogPosition{}, fmt.Errorf("redis: append log: %w", err)
	}
	if err := kit.CheckAppend(name, data, MaxValueSize, keep); err != nil {
		return store.LogPosition{}, fmt.Errorf("redis: append log: %w", err)
	}
	now := s.now()
	cutoff := ""
	if keep.MaxAge > 0 {
		cutoff = strconv.FormatInt(kit.Cutoff(keep, now), 10)
	}
	stream, head := logKeys(name)
	l := s.logs()
	res, err := l.append.Run(ctx, s.client, []string{stream, head},
		data, now.UnixMilli(), keep.MaxCount, cutoff, kit.NewEpoch(), kit.NewEpoch(), LogReclaimBatch, keep.MaxBytes).Slice()
	if err != nil {
		return store.LogPosition{}, fmt.Errorf("redis: append log: %w", err)
	}
	epoch, ok1 := res[0].(string)
	seq, ok2 := res[1].(int64)
	if len(res) != 2 || !ok1 || !ok2 || seq < 1 {
		return store.LogPosition{}, fmt.Errorf("redis: append log %q: %w: unexpected answer %v", name, errCorrupt, res)
	}
	l.heads.Observe(name, epoch, uint64(seq))
	return store.LogPosition{Epoch: epoch, Seq: uint64(seq)}, nil
}

// UpdateAppend implements store.UpdateAppender in one round trip: one script that updates the
// record and appends to the log. The keys are four in one script: the store's one Redis (see the
// package doc), as for every write.
func (s *Store) UpdateAppend(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time,
	name string, data []byte, keep store.Retention) (store.Record, error) {
	now := s.now()
	if err := s.readyWrite(ctx, key, value, expiresAt, now); err != nil {
		return store.Record{}, fmt.Errorf("redis: update append: %w", err)
	}
	if err := kit.CheckAppend(name, data, MaxValueSize, keep); err != nil {
		return store.Record{}, fmt.Errorf("redis: update append: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	cutoff := ""
	if keep.MaxAge > 0 {
		cutoff = strconv.FormatInt(kit.Cutoff(keep, now), 10)
	}
	next := kit.NewVersion()
	stream, head := logKeys(name)
	l := s.logs()
	res, err := l.updateAppend.Run(ctx, s.client, []string{KeyPrefix + key, IndexKey, stream, head},
		strconv.FormatUint(version, 10), value, strconv.FormatUint(next, 10), kit.Millis(expiresAt), kit.Millis(now),
		pexpire(expiresAt, now), key,
		data, now.UnixMilli(), keep.MaxCount, cutoff, kit.NewEpoch(), kit.NewEpoch(), LogReclaimBatch, keep.MaxBytes).Slice()
	if err != nil {
		return store.Record{}, fmt.Errorf("redis: update append: %w", kit.TimedOut(ctx, err))
	}
	if len(res) == 0 {
		return store.Record{}, fmt.Errorf("redis: update append: %w: empty answer", errCorrupt)
	}
	code, _ := res[0].(int64)
	switch {
	case code == 0:
		return store.Record{}, fmt.Errorf("redis: update append: %w", store.ErrNotFound)
	case code < 0:
		return store.Record{}, fmt.Errorf("redis: update append: %w", store.ErrConflict)
	}
	if len(res) == 3 {
		epoch, ok1 := res[1].(string)
		seq, ok2 := res[2].(int64)
		if ok1 && ok2 && seq > 0 {
			l.heads.Observe(name, epoch, uint64(seq))
		}
	}
	return store.Record{Value: kit.Clone(value), Version: next, ExpiresAt: kit.Time(kit.Millis(expiresAt))}, nil
}

// ReadLog implements store.Log in one round trip.
func (s *Store) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	if err := s.logReady(ctx); err != nil {
		return store.LogRange{}, fmt.Errorf("redis: read log: %w", err)
	}
	limit, err := kit.CheckRead(name, limit)
	if err != nil {
		return store.LogRange{}, fmt.Errorf("redis: read log: %w", err)
	}
	stream, head := logKeys(name)
	l := s.logs()
	res, err := l.read.Run(ctx, s.client, []string{stream, head}, min(after, 1<<62), limit).Slice()
	if err != nil {
		return store.LogRange{}, fmt.Errorf("redis: read log: %w", err)
	}
	r := store.LogRange{First: 1, Through: after}
	if len(res) == 0 {
		return r, nil
	}
	if r, err = parseRange(res, after); err != nil {
		return store.LogRange{}, fmt.Errorf("redis: read log %q: %w", name, err)
	}
	if limit > 0 {
		var lastRead uint64
		if n := len(r.Entries); n > 0 {
			lastRead = r.Entries[n-1].Seq
		}
		r.Through = kit.Through(after, lastRead, r.First, r.Last)
	}
	l.heads.Observe(name, r.Epoch, r.Last)
	return r, nil
}

// parseRange reads the answer of readLogScript.
func parseRange(res []any, after uint64) (store.LogRange, error) {
	epoch, ok1 := res[0].(string)
	lastS, ok2 := res[1].(string)
	first, ok3 := res[2].(int64)
	raw, ok4 := res[3].([]any)
	last, err := strconv.ParseUint(lastS, 10, 64)
	if len(res) != 4 || !ok1 || !ok2 || !ok3 || !ok4 || err != nil || first < 1 {
		return store.LogRange{}, fmt.Errorf("%w: unexpected answer", errCorrupt)
	}
	r := store.LogRange{Epoch: epoch, First: uint64(first), Last: last, Through: after}
	for _, x := range raw {
		e, ok := x.([]any)
		if !ok || len(e) != 2 {
			return store.LogRange{}, fmt.Errorf("%w: unexpected entry", errCorrupt)
		}
		id, _ := e[0].(string)
		fields, _ := e[1].([]any)
		seqS, _, _ := strings.Cut(id, "-")
		seq, err := strconv.ParseUint(seqS, 10, 64)
		if err != nil || len(fields)%2 != 0 {
			return store.LogRange{}, fmt.Errorf("%w: entry %q", errCorrupt, id)
		}
		entry := store.LogEntry{Seq: seq, Data: []byte{}}
		for i := 0; i < len(fields); i += 2 {
			k, _ := fields[i].(string)
			v, _ := fields[i+1].(string)
			switch k {
			case "d":
				entry.Data = []byte(v)
			case "t":
				ms, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return store.LogRange{}, fmt.Errorf("%w: entry %q time %q", errCorrupt, id, v)
				}
				entry.At = kit.Time(ms)
			}
		}
		r.Entries = append(r.Entries, entry)
	}
	return r, nil
}

// WaitLog implements store.Log: the first waiter of a process on a log starts one watch, a loop
// of HMGET on the head then XREAD BLOCK after its position, that lasts while anyone waits.
func (s *Store) WaitLog(ctx context.Context, name string, after uint64) error {
	if err := s.logReady(ctx); err != nil {
		return fmt.Errorf("redis: wait log: %w", err)
	}
	if err := kit.CheckLogName(name); err != nil {
		return fmt.Errorf("redis: wait log: %w", err)
	}
	l := s.logs()
	err := l.heads.Wait(ctx, name, after, l.watches.Watch(s.watch))
	if err != nil {
		return fmt.Errorf("redis: wait log: %w", err)
	}
	return nil
}

// watchBlock is how long one XREAD of a watch blocks: it bounds how late a watch notices that
// it was stopped or that the log was deleted and created again.
const watchBlock = 2 * time.Second

func (s *Store) watch(ctx context.Context, name string) {
	stream, head := logKeys(name)
	l := s.logs()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil && !s.closed.Load() {
		h, err := s.client.HMGet(ctx, head, "ep", "seq").Result()
		var seq uint64
		if err == nil {
			epoch, _ := h[0].(string)
			seqS, _ := h[1].(string)
			seq, _ = strconv.ParseUint(seqS, 10, 64)
			l.heads.Observe(name, epoch, seq)
			err = s.client.XRead(ctx, &goredis.XReadArgs{
				Streams: []string{stream, strconv.FormatUint(seq, 10) + "-0"}, Count: 1, Block: watchBlock,
			}).Err()
		}
		switch {
		case err == nil || errors.Is(err, goredis.Nil):
			backoff = 100 * time.Millisecond
		case ctx.Err() == nil:
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

func (s *Store) logReady(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}
