package exchange

// Footprint is how many entries the core's per-name and per-session memory holds now.
// Each is bounded (SECURITY.md, "Limits per resource"), and none grows with names a
// client makes up: only names the upstream listed are remembered per tool.
type Footprint struct {
	ListedNames   int // tool names kept for metric labels (at most 1,000)
	SeenNames     int // tool names the upstream listed (at most 10,000 and 1 MiB)
	UnitKeys      int // tools whose health keys are memoised (at most 4,096; listed tools only)
	StateKeys     int // check_limits inputs whose state keys are memoised (at most 4,096 of at most 1 KB; bound tools only)
	CacheFigures  int // tools with response-cache figures (at most 10,000; listed tools only)
	KnownSessions int // sessions whose last tool list is kept (at most 10,000)
	Flights       int // cache fetches in flight
}

// Footprint returns the sizes of the core's memory kept per name and per session.
func (c *Core) Footprint() Footprint {
	var f Footprint
	f.ListedNames = c.lists.Listed.Len()
	f.SeenNames = c.lists.Seen.Len()
	f.UnitKeys = c.unitKeys.Len()
	f.StateKeys = c.stateKeys.Len()
	f.CacheFigures, f.Flights = c.cache.Footprint()
	f.KnownSessions = c.lists.Known.Len()
	return f
}
