package exchange

import (
	"context"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/internal/deadline"
	"github.com/stategate/stategate/exchange/session"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/tidwall/gjson"
)

// toolLists is the core's tool-list service (toollist.Service) on its engine and state.
type toolLists = toollist.Service

// initLists makes the tool-list service of c; what prev (nil: none) kept of the names
// listed carries over, and c's configuration is checked against it at once.
func (c *Core) initLists(prev *Core) {
	l := &c.lists
	*l = toollist.Service{
		Engine: &c.engine, State: c.state, Health: c.facts.Health, Principal: c.facts.Principal,
		CASRetries: c.opts.CASRetries, ListHealth: c.health.List, Known: toollist.NewKnown(10000), Checker: newChecker(c),
		Fault: func(f abi.Fault, err error, attrs ...any) { c.Fault(f, err, attrs...) },
		Count: c.tally.CountN,
	}
	if prev != nil {
		l.Listed, l.Seen, l.Params = prev.lists.Listed, prev.lists.Seen, prev.lists.Params
		l.Unknown.Check(context.Background(), l.Seen, &l.Checker)
	} else {
		l.Listed, l.Seen, l.Params = toollist.NewListed(toollist.MaxListed), toollist.NewSeen(), toollist.NewParams()
	}
	if n := c.opts.ListMemoBytes; n > 0 {
		l.Memo = toollist.NewLists(64, n)
		l.Tools = toollist.NewTools(16, n/2)
	}
}

// decorateList decorates a tools/list answer (toollist.Service.Decorate); result is msg's
// result member.
func (ex Answer) decorateList(ctx context.Context, msg []byte, result gjson.Result) []byte {
	return ex.core.lists.Decorate(ctx, &toollist.List{
		Msg: msg, Result: result, Scope: ex.appendScope(make([]byte, 0, 128)),
		Version: ex.version, Session: ex.Session, Reader: ex.list,
	})
}

// cacheableVersion is the first protocol version whose results carry ttlMs and cacheScope.
const cacheableVersion = toollist.CacheableVersion

// EndSession frees a session's state (DELETE, or 404 from the upstream); a gateway
// session's record goes with it, so the session is over on every replica.
func (c *Core) EndSession(ctx context.Context, sid, principal string) {
	if sid == "" {
		return
	}
	c.lists.Known.Forget(sid)
	var keys []string
	if session.IsGateway(sid) {
		keys = append(keys, session.RecordKey(sid))
		c.tally.Count(stats.CountSessionsEnded)
	}
	ex := &Exchange{Session: sid, principal: principal}
	in := append(ex.appendScope(nil), toollist.EmptyProbe...)
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
	c.EndSession(ctx, h.Get(hdrSession), c.principalOf(h))
}

// readList returns the reader for the result of a tools/list answer s, for the
// validator's pass (nil when lists are decorated whole).
func (ex Answer) readList(s string) *toollist.Reader {
	c := ex.core
	if ex.Method != MethodToolsList || c.lists.Tools == nil || c.facts.Health {
		return nil
	}
	ex.list = c.lists.Tools.Read(s, maxValidateDepth-1)
	return ex.list
}

// Listed reports whether the upstream listed a tool of this name in an answer the core
// decorated (bounded to the first 1000 names). Hosts use it to keep client-chosen names
// out of metric labels.
func (c *Core) Listed(name string) bool { return c.lists.Listed.Has(name) }

// ListedNames returns the tool names the upstream has listed, to clients (Listed) or to
// the host's own probe (ToolsListed), sorted, without repeats.
func (c *Core) ListedNames() []string { return toollist.Names(c.lists.Listed, c.lists.Seen) }

// ConfigReporter is an optional Reporter extension: the core reports each unknown name
// once per configuration, when it is first found (the gateway logs it). The core also
// publishes it as an events.EventConfigUnknownTool.
type ConfigReporter interface {
	UnknownTool(toollist.UnknownTool)
}

// UnknownTools returns the configuration's names that no tool the upstream listed meets,
// in configuration order; nil until a listing has completed (the host's probe, or a
// tools/list answer without nextCursor).
func (c *Core) UnknownTools() []toollist.UnknownTool { return c.lists.Unknown.Tools() }

// ToolsListed hands the core a tools array the host listed from the upstream itself (the
// gateway's start-up probe): a complete listing, checked against the configuration at once.
func (c *Core) ToolsListed(ctx context.Context, tools []byte) {
	names := gjson.GetBytes(tools, "#.name")
	if !gjson.ValidBytes(tools) || !names.IsArray() {
		return
	}
	c.lists.Seen.Add(names, true)
	c.lists.Unknown.Check(ctx, c.lists.Seen, &c.lists.Checker)
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
			c.events.Publish(events.Event{Type: events.EventConfigUnknownTool, Tool: t.Name, Data: map[string]any{"glob": t.Glob, "where": t.Where}})
		},
	}
}
