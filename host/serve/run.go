// Package serve is what `stategate serve` does once its flags are parsed (Run): load and
// validate the configuration, compile the plugin, open the store, start the gateway in
// front of its upstream with the operations surface (the admin listener, the event bus and
// metrics, probes of the parts), reload on SIGHUP or the admin API, and drain on SIGTERM.
// `stategate stdio` runs the same on an in-process listener (host/stdio); Intercept and
// Demo are the lifecycles of `stategate intercept` and `stategate demo`. The registry of
// running gateways in the state directory (registry.go) is how the admin commands find
// one.
package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// OpsOptions are serve's operations flags.
type OpsOptions struct {
	Admin, TokenFile, LogFormat string
	Drain, Probe                time.Duration
	History                     int    // events kept for replay
	AdminSet                    bool   // --admin was given (not its default)
	StateDir                    string // where the gateway's record (and generated token) go
}

// Run runs the gateway with its operations surface: the app state machine, the
// event bus and metrics, the admin listener, probes of the parts, reload (admin API and
// SIGHUP) and draining on SIGTERM.
func Run(ctx context.Context, cfgPath string, cfg []byte, eng *engine.Engine, upstream Upstream, o Options, a OpsOptions, logger *slog.Logger, stdout io.Writer) error {
	token, err := ops.ReadToken(a.TokenFile)
	if err != nil {
		return err
	}
	if a.Admin == "off" {
		a.Admin = ""
	}
	// The default admin listener (loopback, no address given) gets a generated token when
	// the operator gave none; an address the operator gives keeps its own rules (ops.Listen).
	tokenFile := a.TokenFile
	if a.Admin == DefaultAdmin && !a.AdminSet && token == "" {
		if token, tokenFile, err = writeToken(a.StateDir, o.Name); err != nil {
			return err
		}
		defer os.Remove(tokenFile)
	}
	sv := &served{}
	bus := ops.NewBusHistory(a.History)
	metrics := ops.NewMetrics(sv.listed, sv.tools)
	bus.OnDrop = metrics.Dropped
	metrics.WatchUnknownTools(sv.UnknownTools)
	pub := ops.Publishers{metrics, bus}
	app := ops.NewApp(pub, metrics.AppState)
	rl := &reloader{path: cfgPath, pub: pub, log: logger, replaced: metrics.PluginReplaced}
	rl.eng.Store(eng)
	sv.rl = rl

	// The admin listener opens first: probes answer "starting" while the plugin compiles,
	// and a refused admin address stops start-up before anything else is opened.
	var adminSrv *http.Server
	var adminAddr string
	if a.Admin != "" {
		aln, err := ops.Listen(a.Admin, token)
		if err != nil {
			return err
		}
		admin := ops.NewAdmin(ops.AdminOptions{Token: token, App: app, Bus: bus, Publisher: pub, Metrics: metrics, Logger: logger, Gateway: sv})
		adminAddr = aln.Addr().String()
		adminSrv = &http.Server{Handler: admin, ReadHeaderTimeout: 10 * time.Second}
		go adminSrv.Serve(aln)
		defer adminSrv.Close()
		how := "bearer token required"
		if tokenFile != "" && tokenFile != a.TokenFile {
			how = "bearer token generated in " + tokenFile
		}
		if token == "" {
			how = "no token: loopback only, set --admin-token-file or " + ops.TokenEnv + " to require one"
		}
		fmt.Fprintf(stdout, "stategate: admin http://%s (%s)\n", aln.Addr(), how)
		logger.Info("admin listener", "addr", aln.Addr().String(), "token", token != "")
	}

	tracer, stopTracing, err := setupTracing(ctx, logger)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer stopTracing()
	run, err := startGateway(ctx, cfg, upstream, o, logger, hooks{publisher: pub, reporter: metrics, tracer: tracer,
		replaced: metrics.PluginReplaced, handler: metrics.Instrument,
		// A bolt store keeps the event history too, so it survives a restart.
		opened: func(st store.Store) error {
			if f, ok := st.(ops.HistoryFile); ok {
				return bus.KeepIn(f, logger)
			}
			return nil
		}, closing: bus.Close})
	if err != nil {
		_ = app.Move(ops.StateStopped, "start-up failed: "+err.Error())
		return err
	}
	rl.run = run
	sv.gw.Store(run.gw)
	sv.st.Store(&run.store)
	fmt.Fprintf(stdout, "stategate: serving http://%s -> %s (store %s)\n", run.ln.Addr(), upstream, o.Store)
	if adminSrv != nil && a.StateDir != "" {
		rec := Record{Name: o.Name, PID: os.Getpid(), Admin: "http://" + adminAddr, Listen: "http://" + run.ln.Addr().String(), TokenFile: tokenFile}
		unpublish, err := rec.publish(a.StateDir)
		if err != nil {
			logger.Warn("gateway record not written: the admin commands need --admin", "err", err)
		} else {
			defer unpublish()
			fmt.Fprintf(stdout, "stategate: gateway %s (admin commands find it: stategate tools)\n", o.Name)
		}
	}

	mctx, stopMonitor := context.WithCancel(context.Background())
	defer stopMonitor()
	mon := &monitor{app: app, run: rl, upstream: upstream, pub: pub, log: logger}
	mon.check(mctx)
	go mon.loop(mctx, a.Probe)
	if upstream.mcpTransport() != nil { // a command's child is started for a client only
		go probeTools(mctx, upstream, func() *exchange.Core { return run.gw.Core() }, a.Probe, logger)
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			res := rl.reload(context.Background())
			logger.Info("operator action", "action", "reload", "trigger", "SIGHUP", "ok", res.OK, "errors", strings.Join(res.Errors, "; "))
			pub.Publish(events.Event{Type: events.EventOperatorAction, Data: map[string]any{"action": "reload", "via": "signal", "ok": res.OK}})
			continue
		case <-ctx.Done():
		}
		break
	}

	// Draining: readyz answers 503, new MCP requests 503; in-flight calls and moving calls
	// finish within the bound; then the listener closes (standing streams end).
	stopMonitor()
	_ = app.Move(ops.StateDraining, "signal")
	logger.Info("draining", "bound", a.Drain.String())
	dctx, cancel := context.WithTimeout(context.Background(), a.Drain)
	if err := run.gw.Drain(dctx); err != nil {
		logger.Warn("draining: calls still in flight at the bound", "err", err)
	}
	cancel()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	run.srv.Shutdown(sctx)
	cancel()
	run.srv.Close()
	rl.mu.Lock() // no reload while closing
	run.cleanup()
	rl.mu.Unlock()
	_ = app.Move(ops.StateStopped, "drained")
	return nil
}

// reloader re-reads the configuration file and swaps a valid one in.
type reloader struct {
	mu       sync.Mutex
	path     string
	run      *running
	eng      atomic.Pointer[engine.Engine]
	pub      events.Publisher
	log      *slog.Logger
	replaced func()
}

// reload re-reads the file: an invalid configuration is refused with every error and the
// old one keeps serving; a valid one gets a new plugin pool and exchange core, swapped in
// atomically, and the old pool is closed once its last request is done.
func (r *reloader) reload(ctx context.Context) ops.ReloadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	fail := func(errs ...string) ops.ReloadResult {
		r.log.Warn("config reload refused", "path", r.path, "errors", strings.Join(errs, "; "))
		r.pub.Publish(events.Event{Type: events.EventConfigReloadFailed, Data: map[string]any{"path": r.path, "errors": errs}})
		return ops.ReloadResult{Errors: errs}
	}
	if r.run == nil {
		return fail("the gateway is still starting")
	}
	cfg, err := loadConfig(r.path)
	if err != nil {
		return fail(err.Error())
	}
	check := gjson.ParseBytes(engine.CheckConfig(cfg))
	var res ops.ReloadResult
	for _, e := range check.Get("errors").Array() {
		res.Errors = append(res.Errors, e.Str)
	}
	for _, w := range check.Get("warnings").Array() {
		res.Warnings = append(res.Warnings, w.Str)
	}
	if !check.Get("valid").Bool() {
		if len(res.Errors) == 0 {
			res.Errors = []string{"the configuration is not valid"}
		}
		return fail(res.Errors...)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		return fail(err.Error())
	}
	pool, err := newPool(ctx, r.run.rt, cfg, r.replaced)
	if err != nil {
		return fail("plugin: " + err.Error())
	}
	old, drained := r.run.gw.Swap(pool, cfg)
	r.run.pool = pool
	r.eng.Store(eng)
	go func() {
		<-drained
		old.Close(context.Background())
	}()
	r.log.Info("config reloaded", "path", r.path, "warnings", len(res.Warnings))
	r.pub.Publish(events.Event{Type: events.EventConfigReloaded, Data: map[string]any{"path": r.path, "warnings": len(res.Warnings)}})
	res.OK = true
	return res
}

// monitor probes the store, the plugin and the upstream and sets the app state.
type monitor struct {
	app      *ops.App
	run      *reloader
	upstream Upstream
	pub      events.Publisher
	log      *slog.Logger
	storeBad bool
}

func (m *monitor) loop(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.check(ctx)
		}
	}
}

// probeKey is read to see whether the store answers (it never exists).
const probeKey = "stategate/v1/_probe/session//_probe"

func (m *monitor) check(ctx context.Context) {
	var failing, reasons []string
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	run := m.run.run
	if _, err := run.store.Get(pctx, probeKey); err != nil && ctx.Err() == nil {
		failing, reasons = append(failing, ops.PartStore), append(reasons, "store: "+err.Error())
		if !m.storeBad {
			m.pub.Publish(events.Event{Type: events.EventStoreUnavailable, Data: map[string]any{"error": err.Error()}})
		}
		m.storeBad = true
	} else {
		m.storeBad = false
	}
	m.run.mu.Lock()
	pool := run.pool
	m.run.mu.Unlock()
	if _, err := pool.Call(pctx, abi.FuncCheckConfig, nil); err != nil && ctx.Err() == nil {
		failing, reasons = append(failing, ops.PartPlugin), append(reasons, "plugin: "+err.Error())
	}
	if m.upstream.Kind == "stdio" {
		// a child per session: nothing to probe between sessions
	} else if err := dialUpstream(pctx, m.upstream.URL); err != nil && ctx.Err() == nil {
		failing, reasons = append(failing, ops.PartUpstream), append(reasons, "upstream: "+err.Error())
	}
	if ctx.Err() != nil {
		return
	}
	before := m.app.String()
	reason := "all parts answer"
	if len(reasons) > 0 {
		reason = strings.Join(reasons, "; ")
	}
	m.app.Health(failing, reason)
	if after := m.app.String(); after != before {
		m.log.Info("app state", "state", after, "reason", reason)
	}
}

func dialUpstream(ctx context.Context, u *url.URL) error {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return err
	}
	return c.Close()
}
