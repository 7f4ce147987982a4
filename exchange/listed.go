package exchange

import (
	"slices"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// maxListedTools bounds the tool names a core remembers as listed by the upstream.
const maxListedTools = 1000

// listedTools is the set of tool names the upstream has listed (in any session), bounded:
// hosts label metrics with a tool name only when it is in the set, so a client calling
// made-up names cannot grow a metric's label set.
type listedTools struct {
	mu    sync.RWMutex
	max   int
	names map[string]struct{}
	last  string // the names array last added: lists repeat, so most adds are this one
}

func newListedTools(max int) *listedTools {
	return &listedTools{max: max, names: map[string]struct{}{}}
}

// add records every name of a decorate_tools toolNames array; past max, new names are
// not recorded (the first names stay known).
func (l *listedTools) add(names gjson.Result) {
	if !names.IsArray() {
		return
	}
	var fresh []string
	l.mu.RLock()
	if names.Raw == l.last {
		l.mu.RUnlock()
		return // every name of it was recorded, or the set was full
	}
	names.ForEach(func(_, n gjson.Result) bool {
		if _, ok := l.names[n.Str]; !ok && n.Type == gjson.String && len(n.Str) <= 128 {
			fresh = append(fresh, n.Str)
		}
		return true
	})
	l.mu.RUnlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = strings.Clone(names.Raw)
	for _, n := range fresh {
		if len(l.names) >= l.max {
			return
		}
		l.names[strings.Clone(n)] = struct{}{} // n may read a buffer the caller keeps
	}
}

func (l *listedTools) has(name string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.names[name]
	return ok
}

// Listed reports whether the upstream listed a tool of this name in an answer the core
// decorated (bounded to the first 1000 names). Hosts use it to keep client-chosen names
// out of metric labels.
func (c *Core) Listed(name string) bool { return c.listed.has(name) }

// ListedNames returns the tool names the upstream has listed, to clients (Listed) or to
// the host's own probe (ToolsListed), sorted, without repeats.
func (c *Core) ListedNames() []string {
	c.listed.mu.RLock()
	out := make([]string, 0, len(c.listed.names))
	for n := range c.listed.names {
		out = append(out, n)
	}
	c.listed.mu.RUnlock()
	c.seen.mu.Lock()
	for n := range c.seen.names {
		out = append(out, n)
	}
	c.seen.mu.Unlock()
	slices.Sort(out)
	return slices.Compact(out)
}
