// Package stats is what the exchange counts: the counters, their bounded labels, and the
// figures a core keeps (Stats), shared with the cores that replace it on a reload.
package stats

import (
	"sync/atomic"

	"github.com/stategate/stategate/abi"
)

// Counter names one thing the core counts.
type Counter int

// The counters.
const (
	CountRequests         Counter = iota // POSTs admitted or refused
	CountToolCalls                       // tools/call requests
	CountAllowed                         // tools/call admitted and forwarded
	CountDenied                          // tools/call answered by the gateway (gate, limits, fail-closed)
	CountRejected                        // requests refused with a JSON-RPC error
	CountTimeouts                        // tools/call answered with TOOL_TIMEOUT
	CountInvalidations                   // results that got the invalidation block
	CountTransitions                     // snapshots stored
	CountListChanged                     // calls after which the visible tool set changed
	CountListsDecorated                  // tools/list answers decorated
	CountCASConflicts                    // compare-and-set rounds lost to a concurrent call
	CountIDsRemapped                     // requests whose id the upstream saw replaced
	CountCacheHits                       // tools/call answered from the response cache
	CountCacheMisses                     // cacheable tools/call that went to the upstream
	CountCacheCoalesced                  // identical misses answered by another call's upstream answer
	CountCacheStored                     // results stored in the cache
	CountCachePurged                     // tools whose entries a mutation or an operator purged
	CountTasksCreated                    // task-augmented tools/call answered with a task
	CountTasksSettled                    // tasks whose end the core settled (once each)
	CountSessionsIssued                  // sessions the gateway issued for an upstream that issues none
	CountSessionsEnded                   // gateway sessions ended by DELETE
	CountToolsWithheld                   // tools withheld from a tools/list answer for repeating a member
	CountApprovalsAsked                  // tools/call answered with the question of an approval (input_required)
	CountApprovalsGranted                // tools/call forwarded on a person's valid yes
	CountListCacheHits                   // tools/list answered from the gateway's copy of the upstream's list
	CountListCacheMisses                 // tools/list the copy could have answered that went to the upstream
	CountApprovalsHeld                   // tools/call held for an operator's approval (approvals entry "by": "operator")
	NumCounters
)

func (c Counter) String() string {
	if c < 0 || c >= NumCounters {
		return "unknown"
	}
	return [...]string{"requests", "tool_calls", "calls_allowed", "calls_denied", "requests_rejected", "timeouts",
		"invalidations", "transitions", "list_changed", "lists_decorated", "cas_conflicts", "ids_remapped",
		"cache_hits", "cache_misses", "cache_coalesced", "cache_stored", "cache_purged", "tasks_created", "tasks_settled",
		"sessions_issued", "sessions_ended", "tools_withheld", "approvals_asked", "approvals_granted", "list_cache_hits", "list_cache_misses", "approvals_held"}[c]
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

// Add adds one to c.
func (s *Stats) Add(c Counter) { s.counters[c].Add(1) }

// AddFault adds one to f.
func (s *Stats) AddFault(f abi.Fault) { s.faults[f].Add(1) }

// LabelReporter is an optional Reporter extension: counters the core knows a label for
// (CountRequests: the JSON-RPC method; CountDenied: the denial code) come to CountLabel
// instead of Count. Labels are bounded: MethodLabel and DenialLabel map anything else to
// LabelOther or LabelNone.
type LabelReporter interface {
	CountLabel(c Counter, label string)
}

// Label values for what has no label of its own.
const (
	LabelNone  = "_none"  // a request with no method (a parse error, a batch, a response)
	LabelOther = "_other" // a method or code outside the known set
)

// knownMethods are the MCP methods labelled by name (both protocol eras); other methods
// count as LabelOther, so clients cannot grow the label set.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "tools/list": true, "tools/call": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "prompts/list": true,
	"prompts/get": true, "completion/complete": true, "logging/setLevel": true,
	"notifications/initialized": true, "notifications/cancelled": true,
	"notifications/progress": true, "notifications/roots/list_changed": true,
}

// MethodLabel is the bounded label of a request method.
func MethodLabel(method string) string {
	switch {
	case method == "":
		return LabelNone
	case knownMethods[method]:
		return method
	}
	return LabelOther
}

// DenialLabel is the bounded label of a denial code: the engine's codes are upper-case
// words (abi); anything else is LabelOther.
func DenialLabel(code string) string {
	if code == "" || len(code) > 48 {
		return LabelOther
	}
	for i := 0; i < len(code); i++ {
		if c := code[i]; !(c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9') {
			return LabelOther
		}
	}
	return code
}

// Counting is what a Tally tells as it counts (the exchange's Reporter).
type Counting interface{ Count(Counter) }

// Tally counts what the core did: into Stats, and told to Reporter as it moves.
type Tally struct {
	Stats    *Stats
	Reporter Counting
}

// Count adds one to n and tells the reporter.
func (t Tally) Count(n Counter) {
	t.Stats.Add(n)
	t.Reporter.Count(n)
}

// CountN adds n to a counter.
func (t Tally) CountN(k Counter, n int) {
	for range n {
		t.Count(k)
	}
}

// CountLabel counts n with a label the reporter may use (LabelReporter).
func (t Tally) CountLabel(n Counter, label string) {
	t.Stats.Add(n)
	if lr, ok := t.Reporter.(LabelReporter); ok {
		lr.CountLabel(n, label)
		return
	}
	t.Reporter.Count(n)
}
