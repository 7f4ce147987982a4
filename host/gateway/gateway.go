// Package gateway is the standalone stategate gateway: a Streamable HTTP reverse proxy in
// front of one MCP server. It is the net/http transport around the exchange's HTTP level
// (package exchange/flow, over the shared exchange core), which decides every MCP matter:
// admission, the gate, state, sessions, the failure policy and answer rewriting.
package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/listcache"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/stategate/stategate/host/gateway/upstream"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a Gateway.
type Options struct {
	Upstream *url.URL
	Plugin   *wasmrt.Pool
	Config   []byte // the stategate configuration the plugin runs with
	Store    store.Store
	Logger   *slog.Logger
	// Origins guards against DNS rebinding (Origin and Host validation); requests it
	// refuses get 403 and reach nothing.
	Origins      admission.OriginPolicy
	MaxBodyBytes int               // request and buffered response cap (default 16 MiB)
	BodyTimeout  time.Duration     // how long a request body may take to arrive (default 30 s)
	LeaseWait    time.Duration     // how long a moving call waits for another's lease (default 5 s)
	Transport    http.RoundTripper // default: upstream.Inline (http://), over a keep-alive net/http transport sized for a gateway
	// Publisher receives the exchange core's events (nil: none are published).
	Publisher events.Publisher
	// NewCache makes the response cache when the configuration has a cache section
	// (default: entries in this process's memory, cache.Memory).
	NewCache func(cache.Limits) cache.Cache
	// Reporter also receives every fault and counter the core reports (metrics); the
	// gateway logs faults itself either way.
	Reporter exchange.Reporter
	// PublicURL is the address clients reach the gateway at (scheme://host[:port]): OAuth
	// discovery documents and challenges name it instead of the upstream's (never a
	// request's Host). Empty: they pass unchanged (discovery paths still reach the
	// upstream's documents).
	PublicURL string
	// Tracer, when set, traces every MCP POST request (trace.go); nil: no tracing, and
	// nothing on the request path changes.
	Tracer trace.Tracer
	// ListCache, when set, answers tools/list from the gateway's copy of the upstream's
	// lists while the upstream says they are fresh (exchange/listcache: 2026-07-28 ttlMs
	// and cacheScope; a session whose server declared listChanged while its GET stream is
	// relayed here); its State, Sessions and Fault are the gateway's. nil: every list goes
	// upstream.
	ListCache *listcache.Config
}

// Gateway is an http.Handler.
type Gateway struct {
	opts      Options
	log       *slog.Logger
	gen       atomic.Pointer[generation]
	swapMu    sync.Mutex
	draining  atomic.Bool
	client    *http.Client
	proxy     *httputil.ReverseProxy
	discovery *httputil.ReverseProxy // OAuth discovery documents (discovery.go)
	oauth     oauth.Map
	streams   *streams
	lists     *listcache.Cache // nil: off (Options.ListCache)
	workers   workers          // run the exchanges of tools/call requests
	elicit    *approval.Elicit // the answers to 2025-11-25 approval questions (elicit.go)

	// Stats counts what the exchange core did (across reloads: Swap).
	Stats *stats.Stats
	// PluginReplaced counts plugin instances discarded after a trap or an overrun.
	PluginReplaced atomic.Int64
}

// New returns a Gateway.
func New(opts Options) (*Gateway, error) {
	if opts.Upstream == nil || opts.Plugin == nil || opts.Store == nil {
		return nil, errors.New("gateway: upstream, plugin and store are required")
	}
	public := ""
	if opts.PublicURL != "" {
		var err error
		if public, err = oauth.ParsePublicURL(opts.PublicURL); err != nil {
			return nil, errors.New("gateway: " + err.Error())
		}
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Transport == nil {
		// http:// on the calling goroutine; https (and any Upgrade) through its net/http
		// fallback
		opts.Transport = &upstream.Inline{}
	}
	g := &Gateway{
		opts:    opts,
		log:     opts.Logger,
		client:  &http.Client{Transport: opts.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		streams: newStreams(),
		workers: workers{tasks: make(chan func())},
		oauth:   oauth.Map{Public: public, EndpointPath: opts.Upstream.Path},
		elicit:  approval.NewElicit(store.StateOf(opts.Store), rand.Read),
	}
	if g.opts.NewCache == nil {
		g.opts.NewCache = func(l cache.Limits) cache.Cache { return cache.NewMemory(l, nil) }
	}
	if opts.ListCache != nil {
		lc := *opts.ListCache
		// The gateway feeds every GET stream to its Open's end (feedStream), as session
		// copies need.
		lc.State, lc.Sessions = store.StateOf(opts.Store), true
		lc.Fault = func(err error) { g.Core().Fault(abi.FaultCache, err, "method", "tools/list") }
		g.lists = listcache.New(lc)
	}
	core := g.newCore(opts.Plugin, opts.Config, nil)
	g.gen.Store(g.newGeneration(core, opts.Plugin, opts.Config))
	g.Stats = core.Stats
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = g.target(pr.In.URL)
			pr.Out.Host = ""
			pr.SetXForwarded()
			if g.oauth.Public != "" { // for challengesOf
				pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), clientPathKey{}, pr.In.URL.Path))
			}
		},
		ModifyResponse: g.challengesOf,
		Transport:      opts.Transport,
		FlushInterval:  -1, // SSE: every write goes out at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.Core().Fault(abi.FaultUpstream, err, "method", r.Method)
			var id []byte
			if b, ok := r.Context().Value(bodyKey{}).([]byte); ok {
				if v := gjson.GetBytes(b, "id"); v.Type == gjson.String || v.Type == gjson.Number {
					id = []byte(v.Raw)
				}
			}
			writeJSON(w, http.StatusBadGateway, jsonrpc.AppendError(nil, id, jsonrpc.CodeInternal, "the gateway could not get an answer from the MCP server"))
		},
	}
	g.discovery = g.newDiscoveryProxy()
	return g, nil
}

type bodyKey struct{}

// newCore builds the exchange core for one configuration (prev: the core it replaces).
func (g *Gateway) newCore(plugin *wasmrt.Pool, config []byte, prev *exchange.Core) *exchange.Core {
	var rep exchange.Reporter = reporter{log: g.log}
	if g.opts.Reporter != nil {
		rep = reporter{log: g.log, next: g.opts.Reporter}
	}
	var p exchange.Plugin = plugin
	if g.opts.Tracer != nil {
		p = tracedPlugin{p: plugin, tr: g.opts.Tracer}
	}
	st := traceState(store.StateOf(g.opts.Store), g.opts.Tracer)
	return exchange.New(exchange.Options{Plugin: p, State: st, Reporter: rep,
		Config: config, MaxBodyBytes: g.opts.MaxBodyBytes, LeaseWait: g.opts.LeaseWait, Publisher: g.opts.Publisher,
		NewCache: g.opts.NewCache, Notify: func(except string, msg []byte) { g.streams.broadcast(except, msg) },
		Observed: observed(g.lists), Previous: prev, Elicit: g.elicit,
		// The gateway holds a request open: a call for an operator waits for the decision.
		Holder: approval.NewHold(st, rand.Read)})
}

// observed is the core's Observed for the list cache l (nil when off).
func observed(l *listcache.Cache) func(context.Context, []byte) {
	if l == nil {
		return nil
	}
	return l.Observe
}

// target maps a request URL to the upstream: an upstream with a path is one MCP endpoint
// (every request goes to it); an upstream without one gets the request's path.
func (g *Gateway) target(in *url.URL) *url.URL {
	u := *g.opts.Upstream
	if u.Path == "" || u.Path == "/" {
		u.Path = in.Path
	}
	u.RawQuery = in.RawQuery
	return &u
}

// ServeHTTP implements http.Handler: the flow decides (exchange/flow), the gateway carries
// the decision out.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := flowHeaders(r.Header, r.Host)
	if d, refused := g.current().flow.Check(h); refused {
		g.log.Warn("refused", "reason", strings.TrimPrefix(strings.TrimSpace(string(d.Body)), "Forbidden: "), "remote", r.RemoteAddr)
		writeDecision(w, d)
		return
	}
	if g.draining.Load() && r.Method != http.MethodGet {
		unavailable(w)
		return
	}
	if d, ok, err := isDiscovery(r); ok {
		g.serveDiscovery(w, r, d, err)
		return
	}
	if r.Method == http.MethodPost {
		g.servePost(w, r, h)
		return
	}
	// A GET holds no generation: a standing stream would hold off a reload's drain.
	gen := g.current()
	if r.Method != http.MethodGet {
		if gen = g.acquire(); gen == nil {
			unavailable(w)
			return
		}
		defer gen.release()
	}
	d := gen.flow.Request(r.Context(), flow.Request{Method: r.Method, Path: r.URL.RequestURI(), Headers: h})
	switch {
	case d.Do == flow.DoStream:
		g.serveOwnStream(w, r, d.Session)
	case d.Do == flow.DoForward && d.Session != "":
		g.serveGetStream(w, r, d)
	case d.Do == flow.DoForward:
		g.pass(w, r, d)
	default:
		if d.Session != "" {
			g.streams.end(d.Session) // a DELETE ended it: its standing streams close
		}
		writeDecision(w, d)
	}
}

func (g *Gateway) servePost(w http.ResponseWriter, r *http.Request, h flow.Headers) {
	// A body must arrive within BodyTimeout: slow-body connections do not pile up.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(g.opts.BodyTimeout))
	body, err := readAll(r.Body, r.ContentLength, int64(g.opts.MaxBodyBytes)+1)
	if err != nil {
		// The deadline stays: the server gives up on the rest of the body and closes.
		g.log.Warn("request body not read", "err", err, "remote", r.RemoteAddr)
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusBadRequest, jsonrpc.AppendError(nil, nil, jsonrpc.CodeInvalidRequest, "the request body could not be read in time"))
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	gen := g.acquire()
	if gen == nil {
		unavailable(w)
		return
	}
	var span trace.Span
	if g.opts.Tracer != nil {
		r, span = g.startRequest(r, body)
		h = flowHeaders(r.Header, r.Host) // with the gateway's trace context
	}
	d := gen.flow.Request(r.Context(), flow.Request{Method: r.Method, Path: r.URL.RequestURI(), Headers: h, Body: body})
	if span != nil && d.Exchange != nil {
		describeRequest(span, d.Exchange)
	}
	if d.Do == flow.DoHold { // a tools/call that waits for a person's yes
		g.serveHeld(w, r, d, gen, span, flow.Request{Method: r.Method, Path: r.URL.RequestURI(), Headers: h, Body: body})
		return
	}
	if d.Open != nil && d.Timeout > 0 { // a tools/call
		g.serveCall(w, r, d, gen, span) // releases gen when the call is done, maybe after returning
		return
	}
	if span != nil {
		defer endRequest(span, d.Exchange)
	}
	defer gen.release()
	switch {
	case d.Do != flow.DoForward:
		writeDecision(w, d)
	case d.Open == nil:
		g.pass(w, r, d)
	default:
		g.exchange(r.Context(), g.newSink(w, r, d.Open), r, d)
	}
}

// pass proxies a request the flow forwards unchanged, its answer too (the reverse proxy:
// X-Forwarded-*, trailers, its own answer when the upstream fails). The flow learns the
// answer's status (a DELETE's 2xx ends the session's state).
func (g *Gateway) pass(w http.ResponseWriter, r *http.Request, d flow.Decision) {
	r.Header = http.Header{}
	setHeaders(r.Header, d.Headers)
	if r.Method == http.MethodPost {
		r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, d.Body))
		r.Body = io.NopCloser(bytes.NewReader(d.Body))
		r.ContentLength = int64(len(d.Body))
	}
	if d.Open == nil {
		g.proxy.ServeHTTP(w, r)
		return
	}
	rec := &statusRecorder{ResponseWriter: w}
	g.proxy.ServeHTTP(rec, r)
	d.Open.Answer(rec.status, nil, nil, false)
}

// reporter logs the core's faults and hands faults and counters on to next (metrics).
type reporter struct {
	log  *slog.Logger
	next exchange.Reporter
}

func (r reporter) Fault(f abi.Fault, p abi.Policy, err error, attrs ...any) {
	r.log.Warn("fault", append([]any{"kind", f.String(), "policy", p.String(), "err", err}, attrs...)...)
	if r.next != nil {
		r.next.Fault(f, p, err, attrs...)
	}
}

func (r reporter) Count(c stats.Counter) {
	if r.next != nil {
		r.next.Count(c)
	}
}

// CountLabel hands a labelled count on when next takes labels (stats.LabelReporter).
func (r reporter) CountLabel(c stats.Counter, label string) {
	if lr, ok := r.next.(stats.LabelReporter); ok {
		lr.CountLabel(c, label)
	} else if r.next != nil {
		r.next.Count(c)
	}
}

// UnknownTool logs a name of the configuration that no tool the upstream listed meets, and
// hands it on when next takes it (exchange.ConfigReporter).
func (r reporter) UnknownTool(u toollist.UnknownTool) {
	paths, kinds := make([]string, len(u.Where)), make([]string, len(u.Where))
	for i, p := range u.Where {
		paths[i], kinds[i] = p.Path, p.Kind
	}
	msg := "config names a tool the upstream does not list"
	if u.Glob {
		msg = "config pattern matches no tool the upstream lists"
	}
	r.log.Warn(msg, "tool", u.Name, "where", strings.Join(paths, ", "), "kind", strings.Join(kinds, ","))
	if cr, ok := r.next.(exchange.ConfigReporter); ok {
		cr.UnknownTool(u)
	}
}

// unavailable answers a request that arrives while the gateway drains.
func unavailable(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	http.Error(w, "Service Unavailable: the gateway is shutting down", http.StatusServiceUnavailable)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
