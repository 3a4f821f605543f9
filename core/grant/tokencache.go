package grant

import (
	"crypto/ed25519"
	"crypto/sha256"
	"sync"
	"sync/atomic"
)

// DefaultTokenCacheSize is how many verified tokens a verifier remembers.
const DefaultTokenCacheSize = 1024

// tokenKey is the SHA-256 of the whole token: collision resistance is what makes a cache hit as
// good as a signature check (a weaker hash would let a forged token borrow a verified one's entry).
type tokenKey [sha256.Size]byte

// verifiedToken is what a cache hit skips: steps 3–7 (parse, alg, key, signature, claims). The key
// and kid are kept so that a hit is honoured only while the key source still returns that key.
type verifiedToken struct {
	claims *claims
	kid    string
	key    ed25519.PublicKey
	until  int64 // unix seconds: exp + leeway; a hit past it is ignored
}

// tokenCache holds at most size verified tokens, in shards so that concurrent hits do not contend
// on one lock (a hit takes a read lock only). When full, an insertion evicts the oldest entry of
// its shard: tokens of one issuer share a lifetime, so the oldest is also the first to expire.
type tokenCache struct {
	size   int64
	count  atomic.Int64
	shards []tokenShard
}

type tokenShard struct {
	mu    sync.RWMutex
	m     map[tokenKey]*verifiedToken
	order []tokenKey // insertion order; order[head:] are the keys of m
	head  int
}

func newTokenCache(size int) *tokenCache {
	if size <= 0 {
		return nil
	}
	n := 1
	if size >= 256 {
		n = 16
	}
	c := &tokenCache{size: int64(size), shards: make([]tokenShard, n)}
	for i := range c.shards {
		c.shards[i].m = make(map[tokenKey]*verifiedToken)
	}
	return c
}

func (c *tokenCache) shard(k *tokenKey) *tokenShard { return &c.shards[int(k[0])%len(c.shards)] }

// get returns the entry of a token still within its exp + leeway at now (unix seconds).
func (c *tokenCache) get(k *tokenKey, now int64) *verifiedToken {
	if c == nil {
		return nil
	}
	s := c.shard(k)
	s.mu.RLock()
	e := s.m[*k]
	s.mu.RUnlock()
	if e == nil || now > e.until {
		return nil
	}
	return e
}

func (c *tokenCache) put(k *tokenKey, e *verifiedToken) {
	if c == nil {
		return
	}
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[*k]; ok {
		s.m[*k] = e
		return
	}
	if c.count.Add(1) > c.size {
		c.count.Add(-1)
		if len(s.m) == 0 {
			return // full, and nothing of this shard's to give up: not cached
		}
		delete(s.m, s.order[s.head]) // replaced below: the count does not change
		s.order[s.head] = tokenKey{}
		s.head++
		if s.head > len(s.order)/2 { // reclaim the consumed front
			s.order = append(s.order[:0], s.order[s.head:]...)
			s.head = 0
		}
	}
	s.order = append(s.order, *k)
	s.m[*k] = e
}

// len is the number of cached tokens.
func (c *tokenCache) len() int {
	if c == nil {
		return 0
	}
	return int(c.count.Load())
}
