package serve

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/listcache"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
	"go.opentelemetry.io/otel/trace"
)

// Options are the flags serve, stdio, intercept and demo share: where the gateway
// listens, keeps state and finds its plugin.
type Options struct {
	Listen, Store, Plugin string
	Name                  string // serve: the gateway's name (GatewayName)
	Interruptible         bool
	Origins, Hosts        string       // comma-separated --allowed-origins / --allowed-hosts
	PublicURL             string       // --public-url, checked (oauth.ParsePublicURL); "": the listener's
	Listener              net.Listener // stdio: the in-process listener (nil: listen on Listen)
	// ListCache (--list-cache): tools/list answered from the gateway's copy of the
	// upstream's list while the upstream says it is fresh (exchange/listcache).
	ListCache bool
}

// publicURL is the address OAuth discovery names: --public-url, else the listener's. A
// listener on every interface has no address a client can use, and the log says so.
func (o Options) publicURLFor(addr net.Addr, logger *slog.Logger) string {
	if o.PublicURL != "" {
		return o.PublicURL
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() && logger != nil {
		logger.Warn("public url", "url", "http://"+addr.String(), "warning",
			"the listener is on every interface: OAuth discovery documents and challenges name this address; set --public-url to the one clients use")
	}
	return "http://" + addr.String()
}

// originPolicy is the DNS-rebinding guard for a listener on addr.
func (o Options) originPolicy(addr net.Addr) admission.OriginPolicy {
	p := admission.OriginPolicy{AllowedOrigins: splitList(o.Origins), AllowedHosts: splitList(o.Hosts)}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		p.Loopback = tcp.IP.IsLoopback()
	}
	return p
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// running is a started gateway and what it was built from.
type running struct {
	srv   *http.Server
	ln    net.Listener
	gw    *gateway.Gateway
	rt    *wasmrt.Runtime
	store store.Store
	// pool is the plugin pool serving now (reload swaps it; guarded by the reloader).
	pool    *wasmrt.Pool
	cleanup func()
}

// hooks are what the operations surface hands the gateway (all optional).
type hooks struct {
	publisher events.Publisher
	reporter  exchange.Reporter
	replaced  func()                          // a plugin instance was discarded
	handler   func(http.Handler) http.Handler // wraps the MCP handler (metrics)
	// opened is called with the store once open, before any traffic (the event history
	// keeps itself in a bolt file); closing before the store closes.
	opened  func(store.Store) error
	closing func()
	tracer  trace.Tracer // OpenTelemetry (nil: off)
}

// newPool builds a plugin pool of cfg on rt.
func newPool(ctx context.Context, rt *wasmrt.Runtime, cfg []byte, replaced func()) (*wasmrt.Pool, error) {
	return wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 2 * runtime.GOMAXPROCS(0), Timeout: 2 * time.Second, Replaced: replaced})
}

// startGateway builds the gateway for cfg in front of upstream and serves it on listen.
func startGateway(ctx context.Context, cfg []byte, upstream Upstream, o Options, logger *slog.Logger, hk hooks) (*running, error) {
	// undo closes what was opened so far, last first: a start that fails half-way leaves
	// no plugin, pool, store (a bolt file stays locked while open) or listener behind.
	var undo []func(context.Context)
	fail := func(err error) (*running, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](ctx)
		}
		return nil, err
	}
	rt, err := LoadPlugin(ctx, o.Plugin, logger, o.Interruptible)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func(c context.Context) { rt.Close(c) })
	var gw *gateway.Gateway
	replaced := func() {
		if gw != nil {
			gw.PluginReplaced.Add(1)
		}
		if hk.replaced != nil {
			hk.replaced()
		}
	}
	pool, err := newPool(ctx, rt, cfg, replaced)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func(c context.Context) { pool.Close(c) })
	st, err := store.Open(ctx, o.Store, store.Options{})
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func(context.Context) { st.Close() })
	if hk.opened != nil {
		if err := hk.opened(st); err != nil {
			return fail(err)
		}
		if hk.closing != nil {
			undo = append(undo, func(context.Context) { hk.closing() })
		}
	}
	ln := o.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", o.Listen); err != nil {
			return fail(err)
		}
	}
	undo = append(undo, func(context.Context) { ln.Close() })
	gw, err = gateway.New(gateway.Options{Upstream: upstream.URL, Transport: upstream.Transport, Plugin: pool, Config: cfg, Store: st, Logger: logger,
		Origins: o.originPolicy(ln.Addr()), Publisher: hk.publisher, Reporter: hk.reporter, Tracer: hk.tracer,
		PublicURL: o.publicURLFor(ln.Addr(), logger), ListCache: o.listCache()})
	if err != nil {
		return fail(err)
	}
	if upstream.Sessions != nil {
		// Upstream connections are kept apart by the credentials the configuration names
		// (the current one's, after a reload too).
		upstream.Sessions.SetCredentials(func() (string, []string) { return gw.Core().CredentialHeaders() })
	}
	var h http.Handler = gw
	if hk.handler != nil {
		h = hk.handler(gw)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	r := &running{srv: srv, ln: ln, gw: gw, rt: rt, store: st, pool: pool}
	r.cleanup = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		r.pool.Close(sctx)
		if hk.closing != nil {
			hk.closing()
		}
		st.Close()
		rt.Close(sctx)
	}
	return r, nil
}

// listCache is the gateway's list cache configuration: nil (off) without --list-cache.
func (o Options) listCache() *listcache.Config {
	if !o.ListCache {
		return nil
	}
	return &listcache.Config{}
}
