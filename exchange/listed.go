package exchange

import (
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
	names.ForEach(func(_, n gjson.Result) bool {
		if _, ok := l.names[n.Str]; !ok && n.Type == gjson.String && len(n.Str) <= 128 {
			fresh = append(fresh, n.Str)
		}
		return true
	})
	l.mu.RUnlock()
	if len(fresh) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range fresh {
		if len(l.names) >= l.max {
			return
		}
		l.names[n] = struct{}{}
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
