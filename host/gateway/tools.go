package gateway

import (
	"context"
	"sync"

	"github.com/stategate/stategate/abi"
	"github.com/tidwall/gjson"
)

// emptyListProbe asks the engine, cheaply, which state a list needs for this request.
const emptyListProbe = `,"message":{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}`

// rewriteToolsList decorates a tools/list response through decorate_tools. Decoration
// fails open: on any fault the client gets the upstream's list unchanged.
//
// The engine's answer depends only on the list, the protocol version and the loaded
// snapshots, so it is memoised on exactly those: a repeated list costs a lookup, not a
// rewrite.
func (g *Gateway) rewriteToolsList(ctx context.Context, c *call, msg []byte) ([]byte, [][]byte) {
	result := gjson.GetBytes(msg, "result")
	if !result.IsObject() || result.Index <= 0 {
		return msg, nil
	}
	_, st, err := g.callWithState(ctx, abi.FuncDecorateTools, c.input(func(in []byte) []byte {
		return append(in, emptyListProbe...)
	}), nil)
	if err != nil {
		f := FaultDecoratePlugin
		if _, ok := err.(errStore); ok {
			f = FaultListStore
		}
		g.fault(f, err, "method", "tools/list")
		return msg, nil
	}
	key := listKey(c.version, st, result.Raw)
	out := g.lists.get(key)
	if out == nil {
		in := c.input(func(in []byte) []byte {
			in = append(in, `,"message":{"jsonrpc":"2.0","id":0,"result":`...)
			in = append(in, result.Raw...)
			return append(in, '}')
		})
		out, _, err = g.callWithState(ctx, abi.FuncDecorateTools, in, st)
		if err != nil {
			g.fault(FaultDecoratePlugin, err, "method", "tools/list")
			return msg, nil
		}
		g.lists.put(key, out)
	}
	decorated := gjson.GetBytes(out, "message.result")
	if c.session != "" {
		g.known.set(c.session, []byte(gjson.GetBytes(out, "toolNames").Raw))
	}
	next := make([]byte, 0, len(msg)+len(decorated.Raw)-len(result.Raw))
	next = append(next, msg[:result.Index]...)
	next = append(next, decorated.Raw...)
	next = append(next, msg[result.Index+len(result.Raw):]...)
	return next, nil
}

func listKey(version string, st *states, result string) string {
	n := len(version) + len(result) + 2
	for _, v := range st.vals {
		n += len(v) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, version...)
	b = append(b, 0)
	for _, v := range st.vals {
		b = append(b, v...)
		b = append(b, 0)
	}
	b = append(b, result...)
	return string(b)
}

// listCache memoises decorate_tools answers, bounded in entries and bytes (FIFO).
type listCache struct {
	mu       sync.Mutex
	entries  map[string][]byte
	order    []string
	max      int
	maxBytes int
	bytes    int
}

func newListCache(max, maxBytes int) *listCache {
	return &listCache{entries: map[string][]byte{}, max: max, maxBytes: maxBytes}
}

func (l *listCache) get(key string) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entries[key]
}

func (l *listCache) put(key string, out []byte) {
	size := len(key) + len(out)
	if size > l.maxBytes/4 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.entries[key]; ok {
		return
	}
	for len(l.order) > 0 && (len(l.order) >= l.max || l.bytes+size > l.maxBytes) {
		old := l.order[0]
		l.order = l.order[1:]
		l.bytes -= len(old) + len(l.entries[old])
		delete(l.entries, old)
	}
	l.entries[key] = out
	l.order = append(l.order, key)
	l.bytes += size
}
