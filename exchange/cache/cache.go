// Package cache is the response cache: its protocol across replicas (service.go) and its
// memory on one replica (memory.go). The engine says which admitted calls are cacheable
// and under which key (check_limits' "cache"), and which calls invalidate something
// ("purges"); a Cache keeps the entries (per replica); the Service keeps them coherent
// through generations in the shared state:
//
//   - every tool that was ever cached is listed under IndexKey;
//   - every cached tool has a generation under GenPrefix+tool, a random value never used
//     before (created by the first miss, replaced by every purge);
//   - an entry records its tool's generation from before its upstream call began, and a
//     hit is served only while the generation is unchanged (an expired one matches none);
//   - identical concurrent misses share one upstream call only within one generation
//     (flight.go);
//   - a successful mutation, before its answer is returned, bumps the generation of every
//     indexed tool its invalidation patterns match (decorate_result's "invalidated.tools",
//     with the index passed as knownTools), on every replica at once.
//
// A miss registers its tool in the index before it reads the generation and calls the
// upstream, so a mutation that does not see the tool in the index finished its upstream
// call before this miss's call began: the entry cannot be older than the mutation.
//
// # Notes
//
//   - Standard Go, no I/O, as the rest of the exchange: the shared state comes through
//     Shared (the exchange's State), and the core counts and reports what the service
//     tells it (Config.Count, Config.Fault).
package cache

import (
	"strconv"
	"time"

	"github.com/stategate/stategate/abi"
)

// Cache keeps cached results for one replica. Implementations are safe for concurrent use
// and keep their bounds themselves (entries, bytes, expiry).
type Cache interface {
	// Get returns the entry under key, unless it is missing or expired.
	Get(key string) (Entry, bool)
	// Put stores e under key; false when it refuses (too large).
	Put(key string, e Entry) bool
	// Delete removes key.
	Delete(key string)
	// PurgeTools removes every entry of the named tools and returns how many it removed.
	PurgeTools(tools []string) int
	// PurgeAll removes every entry.
	PurgeAll() int
}

// Entry is one cached tools/call result.
type Entry struct {
	Tool    string
	Result  []byte // the result object as it was answered, without the gateway's duration
	Gen     string // the tool's generation when the call that filled it began
	Stored  time.Time
	Expires time.Time
}

// Size is what the entry counts against the cache's byte bound.
func (e Entry) Size(key string) int {
	return len(key) + len(e.Tool) + len(e.Result) + len(e.Gen) + entryOverhead
}

// entryOverhead approximates an entry's bookkeeping (map slot, list links, times).
const entryOverhead = 128

// Limits are the configuration's cache section, for a host's Cache.
type Limits struct {
	MaxEntries    int
	MaxSizeBytes  int
	MaxEntryBytes int
	TTL           time.Duration
	HighWaterMark float64
}

// Figures are one tool's response-cache figures on this replica (since start or the last
// reload).
type Figures struct {
	Hits          int64 `json:"hits"`
	Misses        int64 `json:"misses"`
	Entries       int64 `json:"entries"`
	Invalidations int64 `json:"invalidations"`
}

// Keys in the shared state.
const (
	IndexKey  = abi.CacheKeyPrefix + "tools" // the tools ever cached, a JSON array
	GenPrefix = abi.CacheKeyPrefix + "gen/"  // + tool: the tool's generation
	MaxTools  = 10000                        // tools the index lists at most; beyond, calls are not cached
)

// Hit is a call answered from the cache: the entry's result, or the result of the
// identical call it waited for (Coalesced).
type Hit struct {
	Result    []byte
	Age       time.Duration
	Coalesced bool
}

// Meta is the hit's _meta member (abi.MetaCache).
func (h Hit) Meta() []byte {
	if h.Coalesced {
		return []byte(`{"hit":true,"ageMs":0,"coalesced":true}`)
	}
	return []byte(`{"hit":true,"ageMs":` + strconv.FormatInt(h.Age.Milliseconds(), 10) + `}`)
}

// Call is one cacheable call's part in the cache, kept by the exchange with the call.
type Call struct {
	Key       string        // the call's cache key ("" when it is not cached)
	TTL       time.Duration // how long its entry lives
	gen       string        // its tool's generation before the upstream call
	flight    *flight       // set while it is the leader of its key's flight
	flightKey string        // its flight's key: the cache key and the generation
}
