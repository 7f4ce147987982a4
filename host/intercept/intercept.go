// Package intercept is `stategate intercept`: the HTTP endpoints Docker's MCP gateway calls
// as interceptors (`--interceptor before:http:URL --interceptor after:http:URL`). It is a
// transport adapter over the exchange core's hook entry points (exchange/pending): the gate
// and the limits run in `before`, the transition and the result's decoration in `after`.
//
// # Notes
//
//   - Docker's gateway posts `before` as {"Session":{},"Params":{"name","arguments",...},
//     "Extra":...} and `after` as the bare CallToolResult (null when the call ended in a
//     JSON-RPC error). An empty answer means "go on"; any other answer must be a
//     CallToolResult, which replaces the call (before) or its result (after). Docker reads the
//     body whatever the HTTP status, so every answer here is 200, and `after` answers empty
//     whenever it has nothing better: an error text would replace a result the server gave.
//   - The URL path names the channel: /before and /after are channel "default", and
//     /CHANNEL/before and /CHANNEL/after another. The channel is what pairs an `after` with
//     its `before` (exchange/pending) and is the session of session-keyed workflows: give
//     each docker-mcp process (one client over stdio) a channel of its own.
package intercept

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/pending"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/tidwall/gjson"
)

// Options configures a Handler.
type Options struct {
	Plugin exchange.Plugin
	Config []byte // the stategate configuration the plugin runs with
	State  exchange.State
	Logger *slog.Logger
	// Origins guards against DNS rebinding: a browser page must not reach the hooks.
	Origins      admission.OriginPolicy
	MaxBodyBytes int           // a hook body's cap (default 16 MiB)
	LeaseWait    time.Duration // how long a call waits for its channel or its lease (default 5 s)
	Publisher    events.Publisher
}

// DefaultChannel is the channel of the paths /before and /after.
const DefaultChannel = "default"

// Handler serves the hook endpoints; it is an http.Handler.
type Handler struct {
	opts    Options
	log     *slog.Logger
	core    *exchange.Core
	pending *pending.Calls
	// Stats counts what the exchange core did.
	Stats *stats.Stats
}

// New returns a Handler.
func New(opts Options) (*Handler, error) {
	if opts.Plugin == nil || opts.State == nil {
		return nil, errors.New("intercept: plugin and state are required")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h := &Handler{opts: opts, log: opts.Logger}
	h.core = exchange.New(exchange.Options{Plugin: opts.Plugin, State: opts.State, Reporter: reporter{h.log},
		Config: opts.Config, MaxBodyBytes: opts.MaxBodyBytes, LeaseWait: opts.LeaseWait, Publisher: opts.Publisher})
	h.pending = pending.New(h.core)
	h.Stats = h.core.Stats
	return h, nil
}

// InFlight reports how many calls are in flight on channel (admitted, result not seen).
func (h *Handler) InFlight(channel string) int { return h.pending.InFlight(channel) }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.opts.Origins.Check(r.Header.Get("Origin"), r.Host); err != nil {
		h.log.Warn("refused", "reason", err.Error(), "remote", r.RemoteAddr)
		http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
		return
	}
	channel, hook, ok := route(r.URL.Path)
	if !ok {
		http.Error(w, "not found: POST /before and /after, or /CHANNEL/before and /CHANNEL/after", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.opts.MaxBodyBytes)+1))
	tooLarge := len(body) > h.opts.MaxBodyBytes
	switch hook {
	case "before":
		var out []byte
		switch {
		case err != nil:
			out = exchange.ErrorResult("The gateway could not read this call, so it did not run it.")
		case tooLarge:
			out = exchange.ErrorResult("The call is over the gateway's size limit, so it did not run.")
		default:
			out = h.before(r.Context(), channel, body)
		}
		answer(w, out)
	case "after":
		if err != nil || tooLarge {
			// The result was not read: the call ended, its outcome is unknown here.
			h.core.Fault(abi.FaultUpstreamBody, errors.New("the after-hook body was not read whole"), "channel", channel)
			body = nil
		}
		answer(w, h.pending.Finish(context.WithoutCancel(r.Context()), channel, body))
	}
}

// before admits a call from Docker's before-hook payload.
func (h *Handler) before(ctx context.Context, channel string, body []byte) []byte {
	if !gjson.ValidBytes(body) {
		return exchange.ErrorResult("The gateway could not read this call, so it did not run it.")
	}
	params := gjson.GetBytes(body, "Params")
	if !params.IsObject() {
		return exchange.ErrorResult("The gateway got a tools/call without params, so it did not run it.")
	}
	return h.pending.Admit(ctx, channel, []byte(params.Raw))
}

// route splits /[CHANNEL/]before|after.
func route(path string) (channel, hook string, ok bool) {
	p := strings.Trim(path, "/")
	channel, hook, found := strings.Cut(p, "/")
	if !found {
		channel, hook = DefaultChannel, p
	}
	if (hook != "before" && hook != "after") || !validChannel(channel) {
		return "", "", false
	}
	return channel, hook, true
}

// validChannel: 1 to 64 of [A-Za-z0-9._-].
func validChannel(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func answer(w http.ResponseWriter, result []byte) {
	if len(result) == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(result)
}

// reporter logs the core's faults.
type reporter struct{ log *slog.Logger }

func (r reporter) Fault(f abi.Fault, p abi.Policy, err error, attrs ...any) {
	r.log.Warn("fault", append([]any{"kind", f.String(), "policy", p.String(), "err", err}, attrs...)...)
}

func (r reporter) Count(stats.Counter) {}
