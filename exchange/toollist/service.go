package toollist

import (
	"context"
	"errors"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/state"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/tidwall/gjson"
)

// Service is the exchange's tool-list service: what it keeps of the upstream's lists, and
// the decoration of tools/list answers through the engine (decorate_tools) on the state.
// The core makes one per configuration (exchange/tools.go); the names listed carry over.
type Service struct {
	Engine     *driver.Engine
	State      state.State
	Health     bool   // tool health: lists carry the units' records, decorated whole
	Principal  string // the principal header ("": none)
	CASRetries int
	// Fault reports a fault; Count counts n of a counter.
	Fault func(f abi.Fault, err error, attrs ...any)
	Count func(c stats.Counter, n int)
	// ListHealth stores what decorate_tools answered for tool health (nil without
	// health); it returns the answer as stored, nil when the list must go undecorated.
	ListHealth func(ctx context.Context, session string, in []byte, st *driver.Loaded, out []byte) []byte

	Memo    *Lists  // decorated lists (nil: the memos are off)
	Tools   *Tools  // decorated elements of lists (nil: the memos are off)
	Known   *Known  // each session's last list
	Listed  *Listed // the names hosts may label metrics with (shared across reloads)
	Seen    *Seen   // every name the upstream listed (shared across reloads)
	Params  *Params // listed tools' Mcp-Param-* declarations (shared across reloads)
	Unknown Unknown // this configuration's names no listed tool meets
	Checker Checker // the unknown names' check
}

// List is one tools/list answer to decorate.
type List struct {
	Msg    []byte       // the answer
	Result gjson.Result // Msg's result member
	Scope  []byte       // the engine input's scope members (the exchange's appendScope)
	// Version is the session's protocol version, Session its id ("": none).
	Version, Session string
	// Reader is the validator's reader of the result (nil when lists are decorated whole).
	Reader *Reader
}

// CacheableVersion is the first protocol version whose list results carry ttlMs and
// cacheScope (CacheableResult, SEP-2549).
const CacheableVersion = "2026-07-28"

// EmptyProbe asks the engine, cheaply, which state a list needs for this request.
const EmptyProbe = `,"message":{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}`

// Decorate decorates a tools/list answer through decorate_tools. Decoration fails open:
// on any fault the client gets the upstream's list unchanged.
//
// The engine's answer depends only on the list, the protocol version and the loaded
// snapshots, so it is memoised on exactly those: a repeated list costs a lookup.
func (l *Service) Decorate(ctx context.Context, r *List) []byte {
	msg, result := r.Msg, r.Result
	if !result.IsObject() || result.Index <= 0 {
		return msg
	}
	scope, st, ok := l.state(ctx, r)
	if !ok {
		return msg
	}
	gen := listKey(r.Version, st, "") // with health, st holds the units' records
	var key string
	if l.Memo != nil {
		key = l.Memo.Key(gen, result.Raw)
	}
	var d *Decorated
	var whole []byte // the decorated message, when the list was assembled in it
	if l.Memo != nil {
		d = l.Memo.Get(key, result.Raw)
	}
	if d == nil && l.Tools != nil && !l.Health {
		var pre, post []byte
		if end := result.Index + len(result.Raw); r.Version < CacheableVersion && end <= len(msg) {
			pre, post = msg[:result.Index], msg[end:] // as jsonrpc.Splice would keep them
		}
		if d, whole = l.Tools.Incremental(gen, result.Raw, r.Reader.Align(result.Raw), pre, post, l.elems(ctx, scope, st)); d != nil && l.Memo != nil {
			l.Memo.Put(key, result.Raw, d)
		}
		if pre == nil {
			whole = nil
		}
	}
	if d == nil {
		if d = l.whole(ctx, r, scope, st, gen, key); d == nil {
			return msg
		}
	}
	return l.decorated(ctx, r, d, whole)
}

// state reads the state a list's decoration needs (with tool health, the records of
// the units in the list: the list itself asks) and returns it with the engine input's
// scope; false when it could not be read (the list then goes undecorated).
func (l *Service) state(ctx context.Context, r *List) ([]byte, *driver.Loaded, bool) {
	scope := r.Scope
	probe := append(scope[:len(scope):len(scope)], EmptyProbe...)
	if l.Health {
		scope = health.AppendNow(scope)
		probe = append(scope[:len(scope):len(scope)], `,"message":`+Envelope...)
		probe = append(probe, r.Result.Raw...)
		probe = append(probe, '}')
	}
	_, st, err := l.Engine.CallWithState(ctx, abi.FuncDecorateTools, probe, nil, nil)
	if err != nil {
		f := abi.FaultDecoratePlugin
		if _, ok := err.(driver.StoreError); ok {
			f = abi.FaultListStore
		}
		l.Fault(f, err, "method", methodToolsList)
		return nil, nil, false
	}
	return scope, st, true
}

// methodToolsList names the method in faults.
const methodToolsList = "tools/list"

// whole decorates the whole list with one engine call, stores what the answer
// writes, and memoises the result when it writes nothing. nil: the list goes undecorated.
func (l *Service) whole(ctx context.Context, r *List, scope []byte, st *driver.Loaded, gen, key string) *Decorated {
	result := r.Result
	const head = `,"message":` + Envelope
	input := func() []byte {
		// Room for the states and the closing braces too: callOwned appends them in place.
		in := make([]byte, 0, len(scope)+len(head)+len(result.Raw)+1+st.StatesSize()+1)
		in = append(append(append(in, scope...), head...), result.Raw...)
		return append(in, '}')
	}
	// The answer's members, read in one pass over it.
	out, m, err := l.Engine.CallOwned(ctx, abi.FuncDecorateTools, input(), st, "message", "toolNames", "states", "withheld", "hidden")
	if err != nil {
		l.Fault(abi.FaultDecoratePlugin, err, "method", methodToolsList)
		return nil
	}
	writes := l.Health && len(m[2].Map()) > 0
	if writes {
		// New pins, quarantines, the index: stored before the list goes out, and
		// never memoised (the next list reads what was stored).
		if out = l.ListHealth(ctx, r.Session, input(), st, out); out == nil {
			return nil
		}
		m = jsonrpc.Members(driver.ParseOwned(out), "message", "toolNames", "states", "withheld", "hidden")
	}
	if !l.Health && m[2].IsObject() {
		// (With tool health, ListHealth stored every write of the answer, this one too.)
		l.remember(ctx, input, out, st)
	}
	res := ResultOf(m[0])
	if !res.IsObject() {
		l.Fault(abi.FaultDecoratePlugin, errors.New("decorate_tools answered no message"), "method", methodToolsList)
		return nil
	}
	d := &Decorated{Result: res.Raw, Names: m[1].Raw, Withheld: len(m[3].Array())}
	if !writes && !m[2].Exists() {
		if l.Memo != nil {
			l.Memo.Put(key, result.Raw, d)
		}
		if l.Tools != nil && !l.Health {
			l.Tools.Memoise(gen, result.Raw, res.Raw, r.Reader.Align(result.Raw), m[1], m[4], m[3])
		}
	}
	return d
}

// elems is the engine for an incremental decoration (Tools.Incremental): it decorates
// the elements it is given as a list of their own, on st. false: the full path must
// decide (it reports the fault, or writes the record).
func (l *Service) elems(ctx context.Context, scope []byte, st *driver.Loaded) func(elems []string) (Answer, bool) {
	return func(elems []string) (Answer, bool) {
		const head = `,"message":` + Envelope + `{"tools":[`
		n := len(scope) + len(head) + 8 + st.StatesSize()
		for _, e := range elems {
			n += len(e) + 1
		}
		in := append(append(make([]byte, 0, n), scope...), head...)
		for i, e := range elems {
			if i > 0 {
				in = append(in, ',')
			}
			in = append(in, e...)
		}
		in = append(in, "]}}"...)
		_, m, err := l.Engine.CallOwned(ctx, abi.FuncDecorateTools, in, st, "message", "toolNames", "hidden", "withheld", "states")
		if err != nil || m[4].Exists() {
			return Answer{}, false
		}
		return Answer{Result: ResultOf(m[0]).Raw, Names: m[1], Hidden: m[2], Withheld: m[3]}, true
	}
}

// decorated counts a decorated list, records the names it lists and returns the
// message with it (whole, when the list was assembled in the message already).
func (l *Service) decorated(ctx context.Context, r *List, d *Decorated, whole []byte) []byte {
	l.Count(stats.CountListsDecorated, 1)
	if d.Withheld > 0 {
		l.Count(stats.CountToolsWithheld, d.Withheld) // tool objects that repeat a member: removed from the list
	}
	names := gjson.Parse(d.Names)
	if r.Session != "" {
		l.Known.Set(r.Session, []byte(d.Names))
	}
	l.Listed.Add(names)
	l.Unknown.Seen(ctx, l.Seen, names, r.Result, &l.Checker)
	if r.Version >= CacheableVersion {
		return jsonrpc.Splice(r.Msg, r.Result, cacheHints([]byte(d.Result), l.Principal))
	}
	if whole != nil {
		return whole
	}
	return jsonrpc.Splice(r.Msg, r.Result, d.Result)
}

// remember stores what a list taught the engine (its "states": the principal's annotation
// record, stateSync.fromAnnotations) with compare-and-set. A write that loses a race is
// re-read and the list decorated again on the fresh record, which merges both (the record
// only grows more cautious). A store failure is a list_store fault: the list goes out
// anyway, and the next list tries again.
func (l *Service) remember(ctx context.Context, input func() []byte, out []byte, st *driver.Loaded) {
	for attempt := 0; attempt < l.CASRetries; attempt++ {
		var lost []string
		var failed error
		gjson.GetBytes(out, "states").ForEach(func(k, v gjson.Result) bool {
			switch err := l.State.Store(ctx, "", k.Str, []byte(v.Raw), st.Slot(k.Str), nil); {
			case errors.Is(err, state.ErrConflict):
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
			l.Count(stats.CountCASConflicts, 1)
			var fresh []state.Slot
			if fresh, failed = l.State.Load(ctx, lost, false); failed == nil {
				st = st.With(lost, fresh)
				var err error
				if out, err = l.Engine.Call(ctx, abi.FuncDecorateTools, input(), st); err != nil {
					l.Fault(abi.FaultDecoratePlugin, err, "method", methodToolsList)
					return
				}
				continue
			}
		}
		l.Fault(abi.FaultListStore, driver.StoreError{Err: failed}, "method", methodToolsList)
		return
	}
	l.Fault(abi.FaultListStore, errors.New("too many compare-and-set conflicts storing the annotation record"), "method", methodToolsList)
}

// cacheHints makes a decorated tools/list result carry valid, conservative cache hints:
// the upstream's ttlMs when it is a number >= 0, else 0 (absent or invalid means 0, so
// the gateway says so); the upstream's cacheScope when it is "public" or "private", else
// "private". A configuration that names a principal header scopes workflow state by
// principal, so the gateway's view may vary by authorization: the scope is then
// "private" whatever the upstream said (a private result must not be shared across
// authorization contexts; combining hints, any private makes private).
func cacheHints(result []byte, principal string) []byte {
	h := gjson.GetManyBytes(result, "ttlMs", "cacheScope")
	if ttl := h[0]; ttl.Type != gjson.Number || ttl.Num < 0 {
		result, _ = answer.Set(result, []byte("0"), "ttlMs")
	}
	valid := h[1].Type == gjson.String && (h[1].Str == "public" || h[1].Str == "private")
	if !valid || (principal != "" && h[1].Str != "private") {
		result, _ = answer.SetString(result, "private", "cacheScope")
	}
	return result
}

// listKey is the memo's generation of a list: the version and the loaded snapshots.
func listKey(version string, st *driver.Loaded, result string) string {
	n := len(version) + len(result) + 2
	for _, s := range st.Slots {
		n += len(s.Value) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, version...)
	b = append(b, 0)
	for _, s := range st.Slots {
		b = append(b, s.Value...)
		b = append(b, 0)
	}
	b = append(b, result...)
	return string(b)
}
