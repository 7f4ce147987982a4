package exchange

import "sync/atomic"

// Stats counts what the core did; every field is read with atomic loads.
type Stats struct {
	Requests, ToolCalls, Denied, Rejected, Timeouts, Invalidations, Transitions atomic.Int64
	ListChanged, ListsDecorated, CASConflicts, IDsRemapped                      atomic.Int64
	Faults                                                                      [NumFaults]atomic.Int64
}
