package exchange

import (
	"context"
	"errors"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/internal/deadline"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/session"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/tidwall/gjson"
)

// toolLists is the core's tool-list service: what it keeps of the upstream's lists
// (exchange/toollist), and the decoration of tools/list answers through the engine, on the
// core's state.
type toolLists struct {
	c       *Core
	memo    *toollist.Lists  // decorated lists (nil: the memos are off)
	tools   *toollist.Tools  // decorated elements of lists (nil: the memos are off)
	known   *toollist.Known  // each session's last list
	listed  *toollist.Listed // the names hosts may label metrics with (shared across reloads)
	seen    *toollist.Seen   // every name the upstream listed (shared across reloads)
	params  *toollist.Params // listed tools' Mcp-Param-* declarations (shared across reloads)
	unknown toollist.Unknown // this configuration's names no listed tool meets
	checker toollist.Checker // the unknown names' check, through c
}

// init makes the service of c; what prev (nil: none) kept of the names listed carries
// over, and c's configuration is checked against it at once.
func (l *toolLists) init(c *Core, prev *Core) {
	l.c, l.known, l.checker = c, toollist.NewKnown(10000), newChecker(c)
	if prev != nil {
		l.listed, l.seen, l.params = prev.lists.listed, prev.lists.seen, prev.lists.params
		l.unknown.Check(context.Background(), l.seen, &l.checker)
	} else {
		l.listed, l.seen, l.params = toollist.NewListed(toollist.MaxListed), toollist.NewSeen(), toollist.NewParams()
	}
	if n := c.opts.ListMemoBytes; n > 0 {
		l.memo = toollist.NewLists(64, n)
		l.tools = toollist.NewTools(16, n/2)
	}
}

// emptyListProbe asks the engine, cheaply, which state a list needs for this request.
const emptyListProbe = `,"message":{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}`

// decorate decorates a tools/list answer through decorate_tools. Decoration fails
// open: on any fault the client gets the upstream's list unchanged.
//
// The engine's answer depends only on the list, the protocol version and the loaded
// snapshots, so it is memoised on exactly those: a repeated list costs a lookup. result is
// msg's result member.
func (l *toolLists) decorate(ctx context.Context, ex *Exchange, msg []byte, result gjson.Result) []byte {
	c := l.c
	if !result.IsObject() || result.Index <= 0 {
		return msg
	}
	scope, st, ok := l.state(ctx, ex, result)
	if !ok {
		return msg
	}
	gen := listKey(ex.version, st, "") // with health, st holds the units' records
	var key string
	if l.memo != nil {
		key = l.memo.Key(gen, result.Raw)
	}
	var d *toollist.Decorated
	var whole []byte // the decorated message, when the list was assembled in it
	if l.memo != nil {
		d = l.memo.Get(key, result.Raw)
	}
	if d == nil && l.tools != nil && !c.facts.Health {
		var pre, post []byte
		if end := result.Index + len(result.Raw); ex.version < cacheableVersion && end <= len(msg) {
			pre, post = msg[:result.Index], msg[end:] // as jsonrpc.Splice would keep them
		}
		if d, whole = l.tools.Incremental(gen, result.Raw, ex.list.Align(result.Raw), pre, post, l.elems(ctx, scope, st)); d != nil && l.memo != nil {
			l.memo.Put(key, result.Raw, d)
		}
		if pre == nil {
			whole = nil
		}
	}
	if d == nil {
		if d = l.whole(ctx, ex, scope, st, gen, key, result); d == nil {
			return msg
		}
	}
	return l.decorated(ctx, ex, msg, result, d, whole)
}

// state reads the state a list's decoration needs (with tool health, the records of
// the units in the list: the list itself asks) and returns it with the engine input's
// scope; false when it could not be read (the list then goes undecorated).
func (l *toolLists) state(ctx context.Context, ex *Exchange, result gjson.Result) ([]byte, *driver.Loaded, bool) {
	c := l.c
	scope := ex.appendScope(make([]byte, 0, 128))
	probe := append(scope[:len(scope):len(scope)], emptyListProbe...)
	if c.facts.Health {
		scope = health.AppendNow(scope)
		probe = append(scope[:len(scope):len(scope)], `,"message":`+toollist.Envelope...)
		probe = append(probe, result.Raw...)
		probe = append(probe, '}')
	}
	_, st, err := c.engine.CallWithState(ctx, abi.FuncDecorateTools, probe, nil, nil)
	if err != nil {
		f := abi.FaultDecoratePlugin
		if _, ok := err.(driver.StoreError); ok {
			f = abi.FaultListStore
		}
		c.Fault(f, err, "method", MethodToolsList)
		return nil, nil, false
	}
	return scope, st, true
}

// whole decorates the whole list with one engine call, stores what the answer
// writes, and memoises the result when it writes nothing. nil: the list goes undecorated.
func (l *toolLists) whole(ctx context.Context, ex *Exchange, scope []byte, st *driver.Loaded, gen, key string, result gjson.Result) *toollist.Decorated {
	c := l.c
	const head = `,"message":` + toollist.Envelope
	input := func() []byte {
		// Room for the states and the closing braces too: callOwned appends them in place.
		in := make([]byte, 0, len(scope)+len(head)+len(result.Raw)+1+st.StatesSize()+1)
		in = append(append(append(in, scope...), head...), result.Raw...)
		return append(in, '}')
	}
	// The answer's members, read in one pass over it.
	out, m, err := c.engine.CallOwned(ctx, abi.FuncDecorateTools, input(), st, "message", "toolNames", "states", "withheld", "hidden")
	if err != nil {
		c.Fault(abi.FaultDecoratePlugin, err, "method", MethodToolsList)
		return nil
	}
	writes := c.facts.Health && len(m[2].Map()) > 0
	if writes {
		// New pins, quarantines, the index: stored before the list goes out, and
		// never memoised (the next list reads what was stored).
		if out = (healthEngine{c}).listHealth(ctx, ex, input(), st, out); out == nil {
			return nil
		}
		m = jsonrpc.Members(driver.ParseOwned(out), "message", "toolNames", "states", "withheld", "hidden")
	}
	if !c.facts.Health && m[2].IsObject() {
		// (With tool health, listHealth stored every write of the answer, this one too.)
		l.remember(ctx, input, out, st)
	}
	res := toollist.ResultOf(m[0])
	if !res.IsObject() {
		c.Fault(abi.FaultDecoratePlugin, errors.New("decorate_tools answered no message"), "method", MethodToolsList)
		return nil
	}
	d := &toollist.Decorated{Result: res.Raw, Names: m[1].Raw, Withheld: len(m[3].Array())}
	if !writes && !m[2].Exists() {
		if l.memo != nil {
			l.memo.Put(key, result.Raw, d)
		}
		if l.tools != nil && !c.facts.Health {
			l.tools.Memoise(gen, result.Raw, res.Raw, ex.list.Align(result.Raw), m[1], m[4], m[3])
		}
	}
	return d
}

// elems is the engine for an incremental decoration (toollist.Tools.Incremental):
// it decorates the elements it is given as a list of their own, on st. false: the full
// path must decide (it reports the fault, or writes the record).
func (l *toolLists) elems(ctx context.Context, scope []byte, st *driver.Loaded) func(elems []string) (toollist.Answer, bool) {
	c := l.c
	return func(elems []string) (toollist.Answer, bool) {
		const head = `,"message":` + toollist.Envelope + `{"tools":[`
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
		_, m, err := c.engine.CallOwned(ctx, abi.FuncDecorateTools, in, st, "message", "toolNames", "hidden", "withheld", "states")
		if err != nil || m[4].Exists() {
			return toollist.Answer{}, false
		}
		return toollist.Answer{Result: toollist.ResultOf(m[0]).Raw, Names: m[1], Hidden: m[2], Withheld: m[3]}, true
	}
}

// decorated counts a decorated list, records the names it lists and returns the
// message with it (whole, when the list was assembled in the message already).
func (l *toolLists) decorated(ctx context.Context, ex *Exchange, msg []byte, result gjson.Result, d *toollist.Decorated, whole []byte) []byte {
	c := l.c
	c.tally.count(stats.CountListsDecorated)
	if d.Withheld > 0 {
		c.tally.countN(stats.CountToolsWithheld, d.Withheld) // tool objects that repeat a member: removed from the list
	}
	names := gjson.Parse(d.Names)
	if ex.Session != "" {
		l.known.Set(ex.Session, []byte(d.Names))
	}
	l.listed.Add(names)
	l.unknown.Seen(ctx, l.seen, names, result, &l.checker)
	if ex.version >= cacheableVersion {
		return jsonrpc.Splice(msg, result, cacheHints([]byte(d.Result), c.facts.Principal))
	}
	if whole != nil {
		return whole
	}
	return jsonrpc.Splice(msg, result, d.Result)
}

// remember stores what a list taught the engine (its "states": the principal's annotation
// record, stateSync.fromAnnotations) with compare-and-set. A write that loses a race is
// re-read and the list decorated again on the fresh record, which merges both (the record
// only grows more cautious). A store failure is a list_store fault: the list goes out
// anyway, and the next list tries again.
func (l *toolLists) remember(ctx context.Context, input func() []byte, out []byte, st *driver.Loaded) {
	c := l.c
	for attempt := 0; attempt < c.opts.CASRetries; attempt++ {
		var lost []string
		var failed error
		gjson.GetBytes(out, "states").ForEach(func(k, v gjson.Result) bool {
			switch err := c.state.Store(ctx, "", k.Str, []byte(v.Raw), st.Slot(k.Str), nil); {
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
			c.tally.count(stats.CountCASConflicts)
			var fresh []Slot
			if fresh, failed = c.state.Load(ctx, lost, false); failed == nil {
				st = st.With(lost, fresh)
				var err error
				if out, err = c.engine.Call(ctx, abi.FuncDecorateTools, input(), st); err != nil {
					c.Fault(abi.FaultDecoratePlugin, err, "method", MethodToolsList)
					return
				}
				continue
			}
		}
		c.Fault(abi.FaultListStore, driver.StoreError{Err: failed}, "method", MethodToolsList)
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

// EndSession frees a session's state (DELETE, or 404 from the upstream); a gateway
// session's record goes with it, so the session is over on every replica.
func (c *Core) EndSession(ctx context.Context, sid, principal string) {
	if sid == "" {
		return
	}
	c.lists.known.Forget(sid)
	var keys []string
	if session.IsGateway(sid) {
		keys = append(keys, session.RecordKey(sid))
		c.tally.count(stats.CountSessionsEnded)
	}
	ex := &Exchange{Session: sid, principal: principal}
	in := append(ex.appendScope(nil), emptyListProbe...)
	in = append(in, '}')
	out, err := c.plugin.Call(ctx, abi.FuncDecorateTools, in)
	if err = driver.AnswerError(out, err); err != nil {
		c.Fault(abi.FaultClearSession, err, "session", sid)
		if keys == nil {
			return
		}
		out = nil // the record is still forgotten: the session must end
	}
	keys = append(keys, workflowKeys(driver.Strings(gjson.GetBytes(out, "needState")))...)
	if err := c.state.Forget(context.WithoutCancel(ctx), sid, keys); err != nil {
		c.Fault(abi.FaultClearSession, err, "session", sid)
	}
}

// EndSessionFor is EndSession for a request's headers (DELETE).
func (c *Core) EndSessionFor(ctx context.Context, h Headers) {
	p := ""
	if c.facts.Principal != "" {
		p = h.Get(c.facts.Principal)
	}
	c.EndSession(ctx, h.Get(hdrSession), p)
}

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

// readList returns the reader for the result of a tools/list answer s, for the
// validator's pass (nil when lists are decorated whole).
func (ex Answer) readList(s string) *toollist.Reader {
	c := ex.core
	if ex.Method != MethodToolsList || c.lists.tools == nil || c.facts.Health {
		return nil
	}
	ex.list = c.lists.tools.Read(s, maxValidateDepth-1)
	return ex.list
}

// Listed reports whether the upstream listed a tool of this name in an answer the core
// decorated (bounded to the first 1000 names). Hosts use it to keep client-chosen names
// out of metric labels.
func (c *Core) Listed(name string) bool { return c.lists.listed.Has(name) }

// ListedNames returns the tool names the upstream has listed, to clients (Listed) or to
// the host's own probe (ToolsListed), sorted, without repeats.
func (c *Core) ListedNames() []string { return toollist.Names(c.lists.listed, c.lists.seen) }

// ConfigReporter is an optional Reporter extension: the core reports each unknown name
// once per configuration, when it is first found (the gateway logs it). The core also
// publishes it as an events.EventConfigUnknownTool.
type ConfigReporter interface {
	UnknownTool(toollist.UnknownTool)
}

// UnknownTools returns the configuration's names that no tool the upstream listed meets,
// in configuration order; nil until a listing has completed (the host's probe, or a
// tools/list answer without nextCursor).
func (c *Core) UnknownTools() []toollist.UnknownTool { return c.lists.unknown.Tools() }

// ToolsListed hands the core a tools array the host listed from the upstream itself (the
// gateway's start-up probe): a complete listing, checked against the configuration at once.
func (c *Core) ToolsListed(ctx context.Context, tools []byte) {
	names := gjson.GetBytes(tools, "#.name")
	if !gjson.ValidBytes(tools) || !names.IsArray() {
		return
	}
	c.lists.seen.Add(names, true)
	c.lists.unknown.Check(ctx, c.lists.seen, &c.lists.checker)
}

// newChecker is what the check of the configuration's unknown names needs of c.
func newChecker(c *Core) toollist.Checker {
	return toollist.Checker{
		Bound: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return deadline.Within(ctx, 10*time.Second)
		},
		Call: func(ctx context.Context, in []byte) ([]byte, error) {
			out, err := c.plugin.Call(ctx, abi.FuncCheckConfig, in)
			return out, driver.AnswerError(out, err)
		},
		Failed: func(err error) {
			c.Fault(abi.FaultDecoratePlugin, err, "method", MethodToolsList, "check", "unknown tools")
		},
		Found: func(t toollist.UnknownTool) {
			if cr, ok := c.reporter.(ConfigReporter); ok {
				cr.UnknownTool(t)
			}
			c.events.publish(events.Event{Type: events.EventConfigUnknownTool, Tool: t.Name, Data: map[string]any{"glob": t.Glob, "where": t.Where}})
		},
	}
}
