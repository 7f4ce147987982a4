package exchange

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/tidwall/gjson"
)

// emptyListProbe asks the engine, cheaply, which state a list needs for this request.
const emptyListProbe = `,"message":{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}`

// decorateTools decorates a tools/list answer through decorate_tools. Decoration fails
// open: on any fault the client gets the upstream's list unchanged.
//
// The engine's answer depends only on the list, the protocol version and the loaded
// snapshots, so it is memoised on exactly those: a repeated list costs a lookup. result is
// msg's result member.
func (c *Core) decorateTools(ctx context.Context, ex *Exchange, msg []byte, result gjson.Result) []byte {
	if !result.IsObject() || result.Index <= 0 {
		return msg
	}
	scope, st, ok := c.listState(ctx, ex, result)
	if !ok {
		return msg
	}
	gen := listKey(ex.version, st, "") // with health, st holds the units' records
	var key string
	if c.lists != nil {
		key = c.lists.key(gen, result.Raw)
	}
	var d *decoratedList
	var whole []byte // the decorated message, when the list was assembled in it
	if c.lists != nil {
		d = c.lists.get(key, result.Raw)
	}
	if d == nil && c.tools != nil && !c.facts.health {
		var pre, post []byte
		if end := result.Index + len(result.Raw); ex.version < cacheableVersion && end <= len(msg) {
			pre, post = msg[:result.Index], msg[end:] // as jsonrpc.Splice would keep them
		}
		if d, whole = c.decorateIncrementally(ctx, scope, st, gen, result.Raw, ex.listAlign(result.Raw), pre, post); d != nil && c.lists != nil {
			c.lists.put(key, result.Raw, d)
		}
		if pre == nil {
			whole = nil
		}
	}
	if d == nil {
		if d = c.decorateWhole(ctx, ex, scope, st, gen, key, result); d == nil {
			return msg
		}
	}
	return c.listDecorated(ctx, ex, msg, result, d, whole)
}

// listState reads the state a list's decoration needs (with tool health, the records of
// the units in the list: the list itself asks) and returns it with the engine input's
// scope; false when it could not be read (the list then goes undecorated).
func (c *Core) listState(ctx context.Context, ex *Exchange, result gjson.Result) ([]byte, *loaded, bool) {
	scope := ex.appendScope(make([]byte, 0, 128))
	probe := append(scope[:len(scope):len(scope)], emptyListProbe...)
	if c.facts.health {
		scope = appendNow(scope)
		probe = append(scope[:len(scope):len(scope)], `,"message":`+listEnvelope...)
		probe = append(probe, result.Raw...)
		probe = append(probe, '}')
	}
	_, st, err := c.callWithState(ctx, abi.FuncDecorateTools, probe, nil, nil)
	if err != nil {
		f := abi.FaultDecoratePlugin
		if _, ok := err.(storeError); ok {
			f = abi.FaultListStore
		}
		c.Fault(f, err, "method", MethodToolsList)
		return nil, nil, false
	}
	return scope, st, true
}

// decorateWhole decorates the whole list with one engine call, stores what the answer
// writes, and memoises the result when it writes nothing. nil: the list goes undecorated.
func (c *Core) decorateWhole(ctx context.Context, ex *Exchange, scope []byte, st *loaded, gen, key string, result gjson.Result) *decoratedList {
	const head = `,"message":` + listEnvelope
	input := func() []byte {
		// Room for the states and the closing braces too: callOwned appends them in place.
		in := make([]byte, 0, len(scope)+len(head)+len(result.Raw)+1+st.statesSize()+1)
		in = append(append(append(in, scope...), head...), result.Raw...)
		return append(in, '}')
	}
	// The answer's members, read in one pass over it.
	out, m, err := c.callOwned(ctx, abi.FuncDecorateTools, input(), st, "message", "toolNames", "states", "withheld", "hidden")
	if err != nil {
		c.Fault(abi.FaultDecoratePlugin, err, "method", MethodToolsList)
		return nil
	}
	writes := c.facts.health && len(m[2].Map()) > 0
	if writes {
		// New pins, quarantines, the index: stored before the list goes out, and
		// never memoised (the next list reads what was stored).
		if out = c.listHealth(ctx, ex, input(), st, out); out == nil {
			return nil
		}
		m = jsonrpc.Members(parseOwned(out), "message", "toolNames", "states", "withheld", "hidden")
	}
	if !c.facts.health && m[2].IsObject() {
		// (With tool health, listHealth stored every write of the answer, this one too.)
		c.remember(ctx, input, out, st)
	}
	res := resultOf(m[0])
	if !res.IsObject() {
		c.Fault(abi.FaultDecoratePlugin, errors.New("decorate_tools answered no message"), "method", MethodToolsList)
		return nil
	}
	d := &decoratedList{result: res.Raw, names: m[1].Raw, withheld: len(m[3].Array())}
	if !writes && !m[2].Exists() {
		if c.lists != nil {
			c.lists.put(key, result.Raw, d)
		}
		if c.tools != nil && !c.facts.health {
			c.memoiseDecorated(gen, result.Raw, res.Raw, ex.listAlign(result.Raw), m[1], m[4], m[3])
		}
	}
	return d
}

// listDecorated counts a decorated list, records the names it lists and returns the
// message with it (whole, when the list was assembled in the message already).
func (c *Core) listDecorated(ctx context.Context, ex *Exchange, msg []byte, result gjson.Result, d *decoratedList, whole []byte) []byte {
	c.count(CountListsDecorated)
	if d.withheld > 0 {
		c.countN(CountToolsWithheld, d.withheld) // tool objects that repeat a member: removed from the list
	}
	names := gjson.Parse(d.names)
	if ex.Session != "" {
		c.known.set(ex.Session, []byte(d.names))
	}
	c.listed.add(names)
	c.toolsSeen(ctx, names, result)
	if ex.version >= cacheableVersion {
		return jsonrpc.Splice(msg, result, c.cacheHints([]byte(d.result)))
	}
	if whole != nil {
		return whole
	}
	return jsonrpc.Splice(msg, result, d.result)
}

// listEnvelope opens the message a list is decorated in: the upstream's result, under an
// envelope of the core's own.
const listEnvelope = `{"jsonrpc":"2.0","id":0,"result":`

// resultOf returns the result of the decorated message msg. decorate_tools changes nothing
// outside the elements of result.tools (ABI.md), so the result is what lies between the
// core's envelope and its closing brace: no pass over the list to find it. A message that
// does not open with the envelope and close two objects is read with gjson.
func resultOf(msg gjson.Result) gjson.Result {
	raw := msg.Raw
	if strings.HasPrefix(raw, listEnvelope) && strings.HasSuffix(raw, "}}") && len(raw) >= len(listEnvelope)+3 {
		return gjson.Parse(raw[len(listEnvelope) : len(raw)-1]) // an object: Parse does not scan it
	}
	return msg.Get("result")
}

// remember stores what a list taught the engine (its "states": the principal's annotation
// record, stateSync.fromAnnotations) with compare-and-set. A write that loses a race is
// re-read and the list decorated again on the fresh record, which merges both (the record
// only grows more cautious). A store failure is a list_store fault: the list goes out
// anyway, and the next list tries again.
func (c *Core) remember(ctx context.Context, input func() []byte, out []byte, st *loaded) {
	for attempt := 0; attempt < c.opts.CASRetries; attempt++ {
		var lost []string
		var failed error
		gjson.GetBytes(out, "states").ForEach(func(k, v gjson.Result) bool {
			switch err := c.state.Store(ctx, "", k.Str, []byte(v.Raw), st.slot(k.Str), nil); {
			case errors.Is(err, ErrConflict):
				lost = append(lost, k.Str)
			case err != nil:
				failed = err
			}
			return failed == nil
		})
		if failed == nil && len(lost) == 0 {
			return
		}
		if failed == nil {
			c.count(CountCASConflicts)
			var fresh []Slot
			if fresh, failed = c.state.Load(ctx, lost, false); failed == nil {
				st = st.with(lost, fresh)
				var err error
				if out, err = c.call(ctx, abi.FuncDecorateTools, input(), st); err != nil {
					c.Fault(abi.FaultDecoratePlugin, err, "method", MethodToolsList)
					return
				}
				continue
			}
		}
		c.Fault(abi.FaultListStore, storeError{failed}, "method", MethodToolsList)
		return
	}
	c.Fault(abi.FaultListStore, errors.New("too many compare-and-set conflicts storing the annotation record"), "method", MethodToolsList)
}

// cacheableVersion is the first protocol version whose list results carry ttlMs and
// cacheScope (CacheableResult, SEP-2549).
const cacheableVersion = "2026-07-28"

// cacheHints makes a decorated tools/list result carry valid, conservative cache hints:
// the upstream's ttlMs when it is a number >= 0, else 0 (absent or invalid means 0, so
// the gateway says so); the upstream's cacheScope when it is "public" or "private", else
// "private". A configuration that names a principal header scopes workflow state by
// principal, so the gateway's view may vary by authorization: the scope is then
// "private" whatever the upstream said (a private result must not be shared across
// authorization contexts; combining hints, any private makes private).
func (c *Core) cacheHints(result []byte) []byte {
	h := gjson.GetManyBytes(result, "ttlMs", "cacheScope")
	if ttl := h[0]; ttl.Type != gjson.Number || ttl.Num < 0 {
		result, _ = answer.Set(result, []byte("0"), "ttlMs")
	}
	valid := h[1].Type == gjson.String && (h[1].Str == "public" || h[1].Str == "private")
	if !valid || (c.facts.principal != "" && h[1].Str != "private") {
		result, _ = answer.SetString(result, "private", "cacheScope")
	}
	return result
}

// EndSession frees a session's state (DELETE, or 404 from the upstream); a gateway
// session's record goes with it, so the session is over on every replica.
func (c *Core) EndSession(ctx context.Context, session, principal string) {
	if session == "" {
		return
	}
	c.known.forget(session)
	var keys []string
	if IsGatewaySession(session) {
		keys = append(keys, sessionRecordKey(session))
		c.count(CountSessionsEnded)
	}
	ex := &Exchange{Session: session, principal: principal}
	in := append(ex.appendScope(nil), emptyListProbe...)
	in = append(in, '}')
	out, err := c.plugin.Call(ctx, abi.FuncDecorateTools, in)
	if err = pluginErr(out, err); err != nil {
		c.Fault(abi.FaultClearSession, err, "session", session)
		if keys == nil {
			return
		}
		out = nil // the record is still forgotten: the session must end
	}
	keys = append(keys, workflowKeys(strs(gjson.GetBytes(out, "needState")))...)
	if err := c.state.Forget(context.WithoutCancel(ctx), session, keys); err != nil {
		c.Fault(abi.FaultClearSession, err, "session", session)
	}
}

// EndSessionFor is EndSession for a request's headers (DELETE).
func (c *Core) EndSessionFor(ctx context.Context, h Headers) {
	p := ""
	if c.facts.principal != "" {
		p = h.Get(c.facts.principal)
	}
	c.EndSession(ctx, h.Get(hdrSession), p)
}

func listKey(version string, st *loaded, result string) string {
	n := len(version) + len(result) + 2
	for _, s := range st.slots {
		n += len(s.Value) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, version...)
	b = append(b, 0)
	for _, s := range st.slots {
		b = append(b, s.Value...)
		b = append(b, 0)
	}
	b = append(b, result...)
	return string(b)
}

// listMemo memoises decorated lists, bounded in entries and bytes (least recently used
// first). An entry is found by its generation and a hash of the upstream's result, and
// holds that result to compare: no key as long as the list is built, and one pass over it
// to look it up.
type listMemo struct {
	mu       sync.Mutex
	seed     maphash.Seed
	entries  *simplelru.LRU[string, listEntry]
	maxBytes int
	bytes    int
}

type listEntry struct {
	src string // the upstream's result
	d   *decoratedList
}

func (e listEntry) size(key string) int { return len(key) + len(e.src) + e.d.size() }

func newListMemo(max, maxBytes int) *listMemo {
	l := &listMemo{seed: maphash.MakeSeed(), maxBytes: maxBytes}
	l.entries, _ = simplelru.NewLRU(max, func(key string, e listEntry) { l.bytes -= e.size(key) }) // max > 0
	return l
}

// key returns the entry key of result under gen. A long result is hashed by samples (its
// length, both ends and 32 slices across it): a lookup compares the result in full anyway,
// and a list that differs where no sample looks costs a comparison up to the difference,
// where hashing it all cost a pass over every byte of every list.
func (l *listMemo) key(gen, result string) string {
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

func (l *listMemo) get(key, result string) *decoratedList {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries.Get(key); ok && e.src == result {
		return e.d
	}
	return nil
}

// put memoises d as the decoration of result (which it keeps: it must not change). A hash
// collision keeps the newer list.
func (l *listMemo) put(key, result string, d *decoratedList) {
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

func (d *decoratedList) size() int { return len(d.result) + len(d.names) + 32 }

// knownTools remembers each session's last tool list (for invalidation events), bounded:
// the sessions least recently used go first.
type knownTools struct {
	lru *lru.Cache[string, []byte] // session -> JSON array of names
}

// maxKnownBytes bounds one session's remembered tool names.
const maxKnownBytes = 256 << 10

func newKnownTools(max int) *knownTools {
	c, _ := lru.New[string, []byte](max) // max > 0: never an error
	return &knownTools{c}
}

func (k *knownTools) set(session string, names []byte) {
	if len(names) > maxKnownBytes || len(names) == 0 {
		return
	}
	k.lru.Add(session, names)
}

func (k *knownTools) get(session string) []byte {
	if session == "" {
		return nil
	}
	names, _ := k.lru.Get(session)
	return names
}

func (k *knownTools) forget(session string) { k.lru.Remove(session) }
