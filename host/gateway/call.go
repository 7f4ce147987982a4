package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/tidwall/gjson"
)

// listChanged is the notification sent when a workflow moved and the visible tools changed.
var listChanged = []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)

// defaultTimeout bounds an upstream call when check_limits could not be asked.
const defaultTimeout = 30 * time.Second

// serveToolCall admits a tools/call through check_limits (a denial is answered here and
// the upstream never runs), forwards it under the tool's timeout, decorates the result and
// advances the workflows.
func (g *Gateway) serveToolCall(w http.ResponseWriter, c *call) {
	g.Stats.ToolCalls.Add(1)
	params := gjson.GetBytes(c.body, "params")
	name := params.Get("name").Str
	args := params.Get("arguments")
	input := c.input(func(in []byte) []byte {
		in = append(in, `,"tool":`...)
		in = strconv.AppendQuote(in, name)
		if args.Exists() {
			in = append(in, `,"arguments":`...)
			in = append(in, args.Raw...)
		}
		return in
	})
	ctx := c.r.Context()
	var lock func([]string) error
	if g.fires[name] {
		// A call that can move a workflow holds its state keys from admission to the
		// stored transition, and runs to completion even if the client leaves: the
		// upstream may act on it, and the workflow must record what it did.
		waitCtx := ctx // waiting for the keys ends with the client; the call itself does not
		lock = func(keys []string) error {
			unlock, err := g.opts.Store.Lock(waitCtx, keys, g.leaseTTL)
			if err == nil {
				c.unlock = unlock
			}
			return err
		}
		ctx = context.WithoutCancel(ctx)
	}
	defer func() {
		if c.unlock != nil {
			c.unlock()
		}
	}()
	out, st, err := g.callWithStateLocked(ctx, abi.FuncCheckLimits, input, nil, lock)
	timeout := defaultTimeout
	var onTimeout []byte
	if err != nil {
		f := FaultLimitsPlugin
		if g.bound[name] {
			f = FaultGatePlugin
			if _, ok := err.(errStore); ok {
				f = FaultGateStore
			}
		}
		if g.fault(f, err, "tool", name) == FailClosed {
			g.Stats.Denied.Add(1)
			g.writeResult(w, c, gateUnavailable(name))
			return
		}
		st = nil
	} else {
		ans := gjson.ParseBytes(out)
		if ans.Get("allow").Type != gjson.True {
			g.Stats.Denied.Add(1)
			g.log.Info("denied", "tool", name, "code", ans.Get("code").Str, "session", c.session)
			g.writeResult(w, c, []byte(ans.Get("result").Raw))
			return
		}
		timeout = time.Duration(ans.Get("timeoutMs").Int()) * time.Millisecond
		onTimeout = []byte(ans.Get("onTimeout").Raw)
	}
	uctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	g.forwardCtx(uctx, w, c, g.callRewriter(name, input, st), onTimeout)
}

// callRewriter decorates the result of tool and advances its workflows.
func (g *Gateway) callRewriter(tool string, input []byte, st *states) rewriter {
	return func(ctx context.Context, c *call, msg []byte) ([]byte, [][]byte) {
		decorated := msg
		in := make([]byte, 0, len(msg)+len(tool)+64)
		in = append(in, `{"tool":`...)
		in = strconv.AppendQuote(in, tool)
		in = append(in, `,"message":`...)
		in = append(in, msg...)
		if known := g.known.get(c.session); known != nil {
			in = append(in, `,"knownTools":`...)
			in = append(in, known...)
		}
		in = append(in, '}')
		out, err := g.opts.Plugin.Call(context.WithoutCancel(ctx), abi.FuncDecorateResult, in)
		if err = pluginErr(out, err); err != nil {
			g.fault(FaultDecoratePlugin, err, "tool", tool)
		} else {
			ans := gjson.ParseBytes(out)
			decorated = []byte(ans.Get("message").Raw)
			if p := ans.Get("invalidated.patterns"); len(p.Array()) > 0 {
				g.Stats.Invalidations.Add(1)
				g.log.Info("invalidated", "tool", tool, "patterns", p.Raw, "tools", ans.Get("invalidated.tools").Raw, "session", c.session)
			}
			if t := ans.Get("truncated"); t.IsObject() {
				g.log.Info("truncated", "tool", tool, "originalBytes", t.Get("originalBytes").Int(), "limitBytes", t.Get("limitBytes").Int())
			}
		}
		m := gjson.GetManyBytes(msg, "error", "result.isError")
		// An answer that repeats members reads differently to different parsers: the
		// workflow does not move on it.
		isError := m[0].Exists() || m[1].Type == gjson.True || hasDuplicateKeys(gjson.ParseBytes(msg), 0)
		var before [][]byte
		if g.bound[tool] && g.transition(context.WithoutCancel(ctx), c, input, isError, st) {
			g.Stats.ListChanged.Add(1)
			before = append(before, listChanged)
		}
		return withDuration(decorated, c.start), before
	}
}

// transition advances the workflows of a finished call and stores the new snapshots with
// compare-and-set. A key whose write loses a race is re-read and the transition re-applied
// to it alone, so concurrent calls never lose a transition and never apply one twice.
// It reports whether the visible tool set changed.
func (g *Gateway) transition(ctx context.Context, c *call, input []byte, isError bool, st *states) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	in := append(input[:len(input):len(input)], `,"isError":`...)
	in = strconv.AppendBool(in, isError)
	committed := map[string]bool{}
	visible := false
	for attempt := 0; attempt < 64; attempt++ {
		var out []byte
		var err error
		out, st, err = g.callWithState(ctx, abi.FuncTransition, in, st)
		if err != nil {
			g.fault(FaultTransition, err, "session", c.session)
			return visible
		}
		ans := gjson.ParseBytes(out)
		if ans.Get("visibleChanged").Type == gjson.True {
			visible = true
		}
		var lost []string
		ans.Get("states").ForEach(func(k, v gjson.Result) bool {
			if committed[k.Str] {
				return true
			}
			owner := ""
			if sessionOwned(k.Str) {
				owner = c.session // freed with the session; handle state outlives it
			}
			ok, err := g.opts.Store.CompareAndSwap(ctx, owner, k.Str, st.get(k.Str), []byte(v.Raw))
			if err != nil {
				g.fault(FaultTransition, errStore{err}, "key", k.Str)
				committed[k.Str] = true // give up on this key; the others still move
				return true
			}
			if ok {
				committed[k.Str] = true
				g.Stats.Transitions.Add(1)
			} else {
				lost = append(lost, k.Str)
			}
			return true
		})
		if len(lost) == 0 {
			return visible
		}
		fresh := &states{keys: st.keys, vals: append([][]byte(nil), st.vals...)}
		for i, k := range fresh.keys {
			for _, l := range lost {
				if k == l {
					v, err := g.opts.Store.Get(ctx, k)
					if err != nil {
						g.fault(FaultTransition, errStore{err}, "key", k)
						return visible
					}
					fresh.vals[i] = v
				}
			}
		}
		st = fresh
	}
	g.fault(FaultTransition, errTooManyConflicts, "session", c.session)
	return visible
}

// sessionOwned reports whether an engine state key belongs to a session
// (stategate/v1/<workflow>/session/...) rather than to a state handle.
func sessionOwned(key string) bool {
	parts := strings.SplitN(key, "/", 5)
	return len(parts) == 5 && parts[3] == "session"
}

type gwError string

func (e gwError) Error() string { return string(e) }

const errTooManyConflicts = gwError("transition: too many compare-and-set conflicts")
