package exchange

import "github.com/stategate/stategate/abi"

import "sync/atomic"

// Counter names one thing the core counts.
type Counter int

// The counters.
const (
	CountRequests       Counter = iota // POSTs admitted or refused
	CountToolCalls                     // tools/call requests
	CountAllowed                       // tools/call admitted and forwarded
	CountDenied                        // tools/call answered by the gateway (gate, limits, fail-closed)
	CountRejected                      // requests refused with a JSON-RPC error
	CountTimeouts                      // tools/call answered with TOOL_TIMEOUT
	CountInvalidations                 // results that got the invalidation block
	CountTransitions                   // snapshots stored
	CountListChanged                   // calls after which the visible tool set changed
	CountListsDecorated                // tools/list answers decorated
	CountCASConflicts                  // compare-and-set rounds lost to a concurrent call
	CountIDsRemapped                   // requests whose id the upstream saw replaced
	CountCacheHits                     // tools/call answered from the response cache
	CountCacheMisses                   // cacheable tools/call that went to the upstream
	CountCacheCoalesced                // identical misses answered by another call's upstream answer
	CountCacheStored                   // results stored in the cache
	CountCachePurged                   // tools whose entries a mutation or an operator purged
	NumCounters
)

func (c Counter) String() string {
	if c < 0 || c >= NumCounters {
		return "unknown"
	}
	return [...]string{"requests", "tool_calls", "calls_allowed", "calls_denied", "requests_rejected", "timeouts",
		"invalidations", "transitions", "list_changed", "lists_decorated", "cas_conflicts", "ids_remapped",
		"cache_hits", "cache_misses", "cache_coalesced", "cache_stored", "cache_purged"}[c]
}

// Stats counts what the core did; read with Get.
type Stats struct {
	counters [NumCounters]atomic.Int64
	faults   [abi.NumFaults]atomic.Int64
}

// Get returns a counter's value.
func (s *Stats) Get(c Counter) int64 { return s.counters[c].Load() }

// Faults returns how often f happened.
func (s *Stats) Faults(f abi.Fault) int64 { return s.faults[f].Load() }

// count adds one to c and tells the reporter.
// countN adds n to a counter.
func (c *Core) countN(k Counter, n int) {
	for range n {
		c.count(k)
	}
}

func (c *Core) count(n Counter) {
	c.Stats.counters[n].Add(1)
	c.reporter.Count(n)
}
