package toollist

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/tidwall/gjson"
)

// Envelope opens the message a list is decorated in: the upstream's result, under an
// envelope of the core's own.
const Envelope = `{"jsonrpc":"2.0","id":0,"result":`

// ResultOf returns the result of the decorated message msg. decorate_tools changes nothing
// outside the elements of result.tools (ABI.md), so the result is what lies between the
// core's envelope and its closing brace: no pass over the list to find it. A message that
// does not open with the envelope and close two objects is read with gjson.
func ResultOf(msg gjson.Result) gjson.Result {
	raw := msg.Raw
	if strings.HasPrefix(raw, Envelope) && strings.HasSuffix(raw, "}}") && len(raw) >= len(Envelope)+3 {
		return gjson.Parse(raw[len(Envelope) : len(raw)-1]) // an object: Parse does not scan it
	}
	return msg.Get("result")
}

// Lists memoises decorated lists, bounded in entries and bytes (least recently used
// first). An entry is found by its generation and a hash of the upstream's result, and
// holds that result to compare: no key as long as the list is built, and one pass over it
// to look it up.
type Lists struct {
	mu       sync.Mutex
	seed     maphash.Seed
	entries  *simplelru.LRU[string, listEntry]
	maxBytes int
	bytes    int
}

type listEntry struct {
	src string // the upstream's result
	d   *Decorated
}

func (e listEntry) size(key string) int { return len(key) + len(e.src) + e.d.size() }

// NewLists returns an empty memo of at most max lists and about maxBytes.
func NewLists(max, maxBytes int) *Lists {
	l := &Lists{seed: maphash.MakeSeed(), maxBytes: maxBytes}
	l.entries, _ = simplelru.NewLRU(max, func(key string, e listEntry) { l.bytes -= e.size(key) }) // max > 0
	return l
}

// Key returns the entry key of result under gen. A long result is hashed by samples (its
// length, both ends and 32 slices across it): a lookup compares the result in full anyway,
// and a list that differs where no sample looks costs a comparison up to the difference,
// where hashing it all cost a pass over every byte of every list.
func (l *Lists) Key(gen, result string) string {
	var h uint64
	if len(result) <= 8<<10 {
		h = maphash.String(l.seed, result)
	} else {
		var mh maphash.Hash
		mh.SetSeed(l.seed)
		mh.WriteString(result[:2048])
		mh.WriteString(result[len(result)-2048:])
		step := (len(result) - 64) / 32
		for i := 0; i < 32; i++ {
			mh.WriteString(result[i*step : i*step+64])
		}
		h = mh.Sum64() ^ uint64(len(result))
	}
	b := make([]byte, 0, len(gen)+9)
	b = append(b, gen...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint64(b, h)
	return string(b)
}

// Get returns the decoration memoised for result under key (nil: none).
func (l *Lists) Get(key, result string) *Decorated {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries.Get(key); ok && e.src == result {
		return e.d
	}
	return nil
}

// Put memoises d as the decoration of result (which it keeps: it must not change). A hash
// collision keeps the newer list.
func (l *Lists) Put(key, result string, d *Decorated) {
	e := listEntry{result, d}
	size := e.size(key)
	if size > l.maxBytes/4 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries.Remove(key) // the collision's older list, when there is one
	for l.entries.Len() > 0 && l.bytes+size > l.maxBytes {
		l.entries.RemoveOldest()
	}
	l.entries.Add(key, e) // past max entries, the oldest goes
	l.bytes += size
}

func (d *Decorated) size() int { return len(d.Result) + len(d.Names) + 32 }

// Known remembers each session's last tool list (for invalidation events), bounded:
// the sessions least recently used go first.
type Known struct {
	lru *lru.Cache[string, []byte] // session -> JSON array of names
}

// maxKnownBytes bounds one session's remembered tool names.
const maxKnownBytes = 256 << 10

// NewKnown returns an empty memory of at most max sessions.
func NewKnown(max int) *Known {
	c, _ := lru.New[string, []byte](max) // max > 0: never an error
	return &Known{c}
}

// Set remembers names (toolNames, a JSON array) as session's last list.
func (k *Known) Set(session string, names []byte) {
	if len(names) > maxKnownBytes || len(names) == 0 {
		return
	}
	k.lru.Add(session, names)
}

// Get returns session's last list (nil: none).
func (k *Known) Get(session string) []byte {
	if session == "" {
		return nil
	}
	names, _ := k.lru.Get(session)
	return names
}

// Forget forgets session's list.
func (k *Known) Forget(session string) { k.lru.Remove(session) }

// Len is how many sessions' lists are kept.
func (k *Known) Len() int { return k.lru.Len() }
