package toollist

import (
	"slices"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// MaxListed bounds the tool names a core remembers as listed by the upstream (Listed).
const MaxListed = 1000

// Listed is the set of tool names the upstream has listed (in any session), bounded:
// hosts label metrics with a tool name only when it is in the set, so a client calling
// made-up names cannot grow a metric's label set.
type Listed struct {
	mu    sync.RWMutex
	max   int
	names map[string]struct{}
	last  string // the names array last added: lists repeat, so most adds are this one
}

// NewListed returns an empty set of at most max names.
func NewListed(max int) *Listed {
	return &Listed{max: max, names: map[string]struct{}{}}
}

// Add records every name of a decorate_tools toolNames array; past max, new names are
// not recorded (the first names stay known).
func (l *Listed) Add(names gjson.Result) {
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

// Has reports whether the upstream listed a tool of this name in an answer the core
// decorated (bounded to the first MaxListed names). Hosts use it to keep client-chosen
// names out of metric labels.
func (l *Listed) Has(name string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.names[name]
	return ok
}

// Len is how many names the set holds.
func (l *Listed) Len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.names)
}

// Names returns the tool names the upstream has listed, to clients (l) or to the host's
// own probe (s), sorted, without repeats.
func Names(l *Listed, s *Seen) []string {
	l.mu.RLock()
	out := make([]string, 0, len(l.names))
	for n := range l.names {
		out = append(out, n)
	}
	l.mu.RUnlock()
	s.mu.Lock()
	for n := range s.names {
		out = append(out, n)
	}
	s.mu.Unlock()
	slices.Sort(out)
	return slices.Compact(out)
}
