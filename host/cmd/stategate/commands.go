package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/plugin/draw"
	"go.opentelemetry.io/otel/trace"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/configfile"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/termsafe"
	"github.com/stategate/stategate/plugin/built"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// defaultPlugin, the --plugin default, is the module the binary embeds (plugin/built).
const defaultPlugin = ""

// pluginUsage is the help text of every --plugin flag.
const pluginUsage = "plugin module file (default: the module built into this binary, which stategate version names)"

// loadConfig reads a JSON or YAML (1.2) configuration and returns it as JSON
// (host/configfile: the one loader of every command).
func loadConfig(path string) ([]byte, error) { return configfile.Load(path) }

// loadValidated loads the configuration at path, validates it (every error at once) and
// logs its warnings: what serve and stdio do before they start.
func loadValidated(path string, logger *slog.Logger) ([]byte, *engine.Engine, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	eng, err := validate(path, cfg)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range eng.Warnings() {
		logger.Warn("config", "warning", w.String())
	}
	return cfg, eng, nil
}

// validate builds the native engine to list every configuration error before start-up.
func validate(path string, cfg []byte) (*engine.Engine, error) {
	eng, err := engine.New(cfg)
	if err != nil {
		var ee *engine.Error
		if errors.As(err, &ee) && len(ee.Details) > 0 {
			return nil, &exitError{code: 1, msg: fmt.Sprintf("config[%s]: %d error(s):\n  %s", path, len(ee.Details), strings.Join(ee.Details, "\n  "))}
		}
		return nil, fmt.Errorf("config[%s]: %w", path, err)
	}
	return eng, nil
}

// loadPlugin compiles the plugin module: the file at path, or the embedded one when path
// is empty.
func loadPlugin(ctx context.Context, path string, logger *slog.Logger, interruptible bool) (*wasmrt.Runtime, error) {
	wasm, name := built.Module, built.Name
	if path != "" {
		var err error
		if wasm, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("plugin[%s]: %w (--plugin names a module file; leave it out to use the module built into this binary)", path, err)
		}
		name = filepath.Base(path)
	}
	return wasmrt.New(ctx, wasm, wasmrt.Options{Interruptible: interruptible, Logger: logger, Name: name})
}

func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: stategate check FILE [--tools tools.json | --upstream URL]"
	fs := newFlags("check", stderr)
	toolsPath := fs.String("tools", "", "a tools/list answer, result or tools array (JSON): also warn about configuration no listed tool meets")
	upstream := fs.String("upstream", "", "list the tools of this MCP server instead")
	var files []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return &exitError{code: 2, msg: usage}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 || (*toolsPath != "" && *upstream != "") {
		return &exitError{code: 2, msg: usage}
	}
	args = files
	cfg, err := loadConfig(args[0])
	if err != nil {
		return err
	}
	res := gjson.ParseBytes(engine.CheckConfig(cfg))
	if res.Get("valid").Bool() && (*toolsPath != "" || *upstream != "") {
		// With the tool list, the engine also says which configuration no listed tool meets.
		if res, err = explainAnswer(ctx, args[0], *toolsPath, *upstream); err != nil {
			return err
		}
	}
	for _, e := range res.Get("errors").Array() {
		fmt.Fprintln(stdout, "error:   "+termsafe.String(e.Str))
	}
	for _, w := range res.Get("warnings").Array() {
		fmt.Fprintln(stdout, "warning: "+termsafe.String(w.Str)) // may name the upstream's tools
	}
	if !res.Get("valid").Bool() {
		return &exitError{code: 1, msg: fmt.Sprintf("%s: invalid (%d error(s))", args[0], len(res.Get("errors").Array()))}
	}
	for _, w := range res.Get("workflows").Array() {
		fmt.Fprintf(stdout, "workflow %s: fingerprint %s\n", termsafe.String(w.Get("id").Str), w.Get("fingerprint").Str)
	}
	fmt.Fprintf(stdout, "%s: valid (%d warning(s))\n", args[0], len(res.Get("warnings").Array()))
	return nil
}

func cmdGraph(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("graph", stderr)
	format := fs.String("format", "mermaid", "mermaid or dot")
	var files []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return &exitError{code: 2, msg: "usage: stategate graph FILE [--format mermaid|dot]"}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 || (*format != "mermaid" && *format != "dot") {
		return &exitError{code: 2, msg: "usage: stategate graph FILE [--format mermaid|dot]"}
	}
	cfg, err := loadConfig(files[0])
	if err != nil {
		return err
	}
	eng, err := validate(files[0], cfg)
	if err != nil {
		return err
	}
	graphs := workflowGraphs(eng, *format)
	if len(graphs) == 0 {
		return &exitError{code: 1, msg: files[0] + ": no workflows"}
	}
	for _, g := range graphs {
		fmt.Fprint(stdout, g.Text)
	}
	return nil
}

// workflowGraph is one workflow drawn as a diagram.
type workflowGraph struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	// The graph itself, for the status page's diagram (the JSON carries them; graph
	// prints Text).
	Key         string       `json:"key"`
	Initial     string       `json:"initial"`
	States      []graphState `json:"states"`
	Transitions []graphEdge  `json:"transitions"`
}

type graphState struct {
	Name    string   `json:"name"` // its path
	Final   bool     `json:"final,omitempty"`
	Tools   []string `json:"tools"`             // the tools bound to it
	Parent  string   `json:"parent,omitempty"`  // the path of the compound or parallel state holding it
	Kind    string   `json:"kind,omitempty"`    // compound or parallel ("" for an atomic or final state)
	Initial string   `json:"initial,omitempty"` // a compound state's initial child (its path)
}

type graphEdge struct {
	From  string   `json:"from"`
	To    string   `json:"to"`
	Event string   `json:"event"`
	Tools []string `json:"tools"` // the tools whose success fires the event
}

// workflowGraphs draws each workflow of eng's configuration (format mermaid or dot).
func workflowGraphs(eng *engine.Engine, format string) []workflowGraph {
	var out []workflowGraph
	c := eng.Config()
	for _, w := range c.Workflows {
		var b strings.Builder
		toolsIn := func(state string) string { return strings.Join(draw.ToolsAt(w, state), ", ") }
		firedBy := func(event string) string {
			var ts []string
			for _, t := range w.Tools {
				if t.Event == event {
					ts = append(ts, t.Tool)
				}
			}
			if len(ts) == 0 {
				return ""
			}
			return " (" + strings.Join(ts, ", ") + ")"
		}
		if !w.Flat {
			if format == "mermaid" {
				draw.Mermaid(&b, w, firedBy)
			} else {
				draw.Dot(&b, w, firedBy)
			}
		} else if format == "mermaid" {
			// The title is a YAML double-quoted string: "(key: session)" has a ": " that a
			// plain YAML scalar may not hold (Mermaid refuses the front matter).
			fmt.Fprintf(&b, "---\ntitle: %s\n---\nstateDiagram-v2\n", strconv.Quote("workflow "+w.ID+" (key: "+keyText(w.Key == 1, w.KeyArg)+")"))
			fmt.Fprintf(&b, "    [*] --> %s\n", w.Initial)
			for _, s := range w.States[1:] {
				if t := toolsIn(s.Name); t != "" {
					fmt.Fprintf(&b, "    %s : %s\\ntools: %s\n", s.Name, s.Name, t)
				}
				for _, e := range s.On {
					fmt.Fprintf(&b, "    %s --> %s : %s%s\n", s.Name, e.Target, e.Event, firedBy(e.Event))
				}
				if s.Final {
					fmt.Fprintf(&b, "    %s --> [*]\n", s.Name)
				}
			}
		} else {
			fmt.Fprintf(&b, "digraph %s {\n  label=%s;\n  rankdir=LR;\n  node [shape=box, style=rounded];\n  \"__start\" [shape=point];\n  \"__start\" -> %s;\n",
				draw.DotQuote(w.ID), draw.DotQuote("workflow "+w.ID+" (key: "+keyText(w.Key == 1, w.KeyArg)+")"), draw.DotQuote(w.Initial))
			for _, s := range w.States[1:] {
				shape := ""
				if s.Final {
					shape = ", peripheries=2"
				}
				label := s.Name
				if t := toolsIn(s.Name); t != "" {
					label += "\ntools: " + t
				}
				fmt.Fprintf(&b, "  %s [label=%s%s];\n", draw.DotQuote(s.Name), draw.DotQuote(label), shape)
				for _, e := range s.On {
					fmt.Fprintf(&b, "  %s -> %s [label=%s];\n", draw.DotQuote(s.Name), draw.DotQuote(e.Target), draw.DotQuote(e.Event+firedBy(e.Event)))
				}
			}
			b.WriteString("}\n")
		}
		g := workflowGraph{ID: w.ID, Text: b.String(), Key: keyText(w.Key == 1, w.KeyArg), Initial: w.Initial,
			States: []graphState{}, Transitions: []graphEdge{}}
		// The page draws states by path (a compound or parallel node's children are drawn
		// beside it, by their dotted paths) and each transition to the node it resolves to.
		for _, s := range w.States[1:] {
			gs := graphState{Name: s.Path, Final: s.Final, Tools: append([]string{}, draw.ToolsAt(w, s.Path)...)}
			if p := w.Node(s.Parent); p != nil && s.Parent > 0 {
				gs.Parent = p.Path
			}
			if gs.Kind = draw.KindName(&s); gs.Kind == "compound" {
				if n := w.Node(s.Initial); n != nil {
					gs.Initial = n.Path
				}
			}
			g.States = append(g.States, gs)
			edge := func(event string, toNode int) {
				ts := []string{}
				for _, t := range w.Tools {
					if event != "" && t.Event == event {
						ts = append(ts, t.Tool)
					}
				}
				to := s.Path // a transition without a target stays
				if n := w.Node(toNode); n != nil {
					to = n.Path
				}
				g.Transitions = append(g.Transitions, graphEdge{From: s.Path, To: to, Event: event, Tools: ts})
			}
			for _, e := range s.On {
				edge(e.Event, e.To)
			}
			for _, e := range s.OnDone {
				edge("", e.To) // the state's done event
			}
		}
		out = append(out, g)
	}
	return out
}

// toolHint says what the configuration does with a tool, for the status page: each
// workflow binding it, the states it runs in and the event its success fires ("" for a
// tool no workflow binds).
func toolHint(eng *engine.Engine, tool string) string {
	var parts []string
	for _, ref := range eng.Config().Bindings(tool) {
		h := ref.Workflow.ID + ": in " + strings.Join(ref.Binding.States, ", ")
		if ref.Binding.Event != "" {
			h += " → " + ref.Binding.Event
		}
		parts = append(parts, h)
	}
	return strings.Join(parts, "; ")
}

func keyText(argument bool, arg string) string {
	if argument {
		return "argument:" + arg
	}
	return "session"
}

func cmdCall(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("call", stderr)
	cfgPath := fs.String("config", "", "configuration file (JSON or YAML)")
	plugin := fs.String("plugin", defaultPlugin, pluginUsage)
	if wantsHelp(args) {
		return fs.Parse([]string{"-h"})
	}
	if len(args) == 0 {
		return &exitError{code: 2, msg: "usage: stategate call FUNC --config FILE [--plugin FILE] < input.json (FUNC: " + functionNames() + ")"}
	}
	fn, ok := abi.FunctionByName(args[0])
	if !ok {
		return &exitError{code: 2, msg: fmt.Sprintf("stategate call: unknown function %q (one of %s)", args[0], functionNames())}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return &exitError{code: 2}
	}
	var cfg []byte
	if *cfgPath != "" {
		var err error
		if cfg, err = loadConfig(*cfgPath); err != nil {
			return err
		}
	}
	in, err := io.ReadAll(stdin)
	if err != nil {
		return err
	}
	rt, err := loadPlugin(ctx, *plugin, nil, false)
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	inst, err := rt.Instantiate(ctx, cfg)
	if err != nil {
		return err
	}
	out, err := inst.Call(ctx, fn, bytes.TrimSpace(in))
	if err != nil {
		return err
	}
	stdout.Write(append(out, '\n'))
	if gjson.GetBytes(out, "error").Exists() {
		return &exitError{code: 1}
	}
	return nil
}

// serveOptions are the flags shared by serve and demo.
type serveOptions struct {
	listen, store, plugin string
	name                  string // serve: the gateway's name (gatewayName)
	interruptible         bool
	origins, hosts        string       // comma-separated --allowed-origins / --allowed-hosts
	publicURL             string       // --public-url, checked (exchange.ParsePublicURL); "": the listener's
	listener              net.Listener // stdio: the in-process listener (nil: listen on listen)
}

// publicURL is the address OAuth discovery names: --public-url, else the listener's. A
// listener on every interface has no address a client can use, and the log says so.
func (o serveOptions) publicURLFor(addr net.Addr, logger *slog.Logger) string {
	if o.publicURL != "" {
		return o.publicURL
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() && logger != nil {
		logger.Warn("public url", "url", "http://"+addr.String(), "warning",
			"the listener is on every interface: OAuth discovery documents and challenges name this address; set --public-url to the one clients use")
	}
	return "http://" + addr.String()
}

// originPolicy is the DNS-rebinding guard for a listener on addr.
func (o serveOptions) originPolicy(addr net.Addr) admission.OriginPolicy {
	p := admission.OriginPolicy{AllowedOrigins: splitList(o.origins), AllowedHosts: splitList(o.hosts)}
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
func startGateway(ctx context.Context, cfg []byte, upstream upstreamSpec, o serveOptions, logger *slog.Logger, hk hooks) (*running, error) {
	// undo closes what was opened so far, last first: a start that fails half-way leaves
	// no plugin, pool, store (a bolt file stays locked while open) or listener behind.
	var undo []func(context.Context)
	fail := func(err error) (*running, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](ctx)
		}
		return nil, err
	}
	rt, err := loadPlugin(ctx, o.plugin, logger, o.interruptible)
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
	st, err := store.Open(ctx, o.store, store.Options{})
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
	ln := o.listener
	if ln == nil {
		if ln, err = net.Listen("tcp", o.listen); err != nil {
			return fail(err)
		}
	}
	undo = append(undo, func(context.Context) { ln.Close() })
	gw, err = gateway.New(gateway.Options{Upstream: upstream.url, Transport: upstream.transport, Plugin: pool, Config: cfg, Store: st, Logger: logger,
		Origins: o.originPolicy(ln.Addr()), Publisher: hk.publisher, Reporter: hk.reporter, Tracer: hk.tracer,
		PublicURL: o.publicURLFor(ln.Addr(), logger)})
	if err != nil {
		return fail(err)
	}
	if upstream.sessions != nil {
		// Upstream connections are kept apart by the credentials the configuration names
		// (the current one's, after a reload too).
		upstream.sessions.SetCredentials(func() (string, []string) { return gw.Core().CredentialHeaders() })
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

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	cfgPath := fs.String("config", "", "configuration file (JSON or YAML)")
	up := fs.String("upstream", "", "URL of the MCP server to front (e.g. http://127.0.0.1:3001/mcp); or give a stdio server's command after --")
	upTransport := fs.String("upstream-transport", "auto", "the upstream URL's transport: streamable (Streamable HTTP), sse (the 2024-11-05 HTTP+SSE transport) or auto (sse when the path ends in /sse)")
	maxSessions := fs.Int("max-sessions", 16, "a stdio command or HTTP+SSE upstream: at most this many sessions at once (each a child process or an upstream SSE stream); one more initialize is answered 503")
	idle := fs.Duration("session-idle", 30*time.Minute, "a stdio command or HTTP+SSE upstream: a session with no request, call or GET stream for this long ends, and its child or upstream stream with it (0: never)")
	var o serveOptions
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&o.name, "name", "", "this gateway's name: its default store file and admin record in the state directory are NAME.db and NAME.admin.json (default: from --listen, e.g. 127.0.0.1-8080)")
	fs.StringVar(&o.store, "store", "", "state store (default: bolt:$XDG_STATE_HOME/stategate/NAME.db, else ~/.local/state/stategate/NAME.db): bolt:PATH (a file that survives restarts; PATH relative to the working directory), memory, redis://HOST:PORT/DB (shared by replicas), redis+cluster://HOST:PORT[,HOST:PORT...] (Redis Cluster) or redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER (a primary found through Sentinel)")
	fs.StringVar(&o.plugin, "plugin", defaultPlugin, pluginUsage)
	fs.BoolVar(&o.interruptible, "interruptible", false, "stop plugin calls at their deadline (hard), at about 10x the cost per call")
	fs.StringVar(&o.origins, "allowed-origins", "", "comma-separated browser origins allowed to call the gateway (default: loopback origins only; * allows any)")
	fs.StringVar(&o.hosts, "allowed-hosts", "", "comma-separated Host names the listener answers to besides loopback names (checked on loopback listeners, or whenever set)")
	fs.StringVar(&o.publicURL, "public-url", "", "the address clients reach the gateway at (scheme://host[:port]); OAuth discovery documents and challenges name it instead of the upstream's (default: http:// and the listen address)")
	var a opsOptions
	fs.StringVar(&a.admin, "admin", defaultAdmin, "admin listener address (probes, admin API, events, metrics, status page), or off; by default loopback on a free port with a generated token that `stategate tools` and the other admin commands find")
	fs.StringVar(&a.tokenFile, "admin-token-file", "", "file holding the admin bearer token (or set "+adminTokenEnv+"); without one the admin listener must be loopback")
	fs.StringVar(&a.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&a.drain, "drain-timeout", 30*time.Second, "on SIGTERM, how long in-flight calls and transitions may take to finish")
	fs.IntVar(&a.history, "event-history", 10000, "how many events the admin listener keeps for replay (GET /admin/events?since=, stategate events --count); in the store file when the store is bolt")
	fs.DurationVar(&a.probe, "probe-interval", 5*time.Second, "how often the store, the plugin and the upstream are probed (app state degraded/ready)")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	fs.Visit(func(f *flag.Flag) { a.adminSet = a.adminSet || f.Name == "admin" })
	var err error
	if *cfgPath == "" {
		return &exitError{code: 2, msg: "stategate serve: --config FILE is required: the configuration (JSON or YAML; examples/config/ has some to start from, `stategate serve --help` lists every flag)"}
	}
	if o.publicURL != "" {
		if o.publicURL, err = exchange.ParsePublicURL(o.publicURL); err != nil {
			return &exitError{code: 2, msg: "stategate serve: --public-url: " + strings.TrimPrefix(err.Error(), "public url ")}
		}
	}
	if a.logFormat != "text" && a.logFormat != "json" {
		return &exitError{code: 2, msg: fmt.Sprintf("stategate serve: --log-format %q: want text or json", a.logFormat)}
	}
	logger := newLogger(a.logFormat, stderr)
	if *idle == 0 {
		*idle = -1 // upstream.Options: never
	}
	upstream, err := resolveUpstream(*up, *upTransport, fs.Args(), *maxSessions, *idle, logger)
	if err != nil {
		return &exitError{code: 2, msg: "stategate serve: " + err.Error()}
	}
	if upstream.sessions != nil {
		defer upstream.sessions.Close() // children end with the gateway
	}
	if o.name, err = gatewayName(o.name, o.listen); err != nil {
		return &exitError{code: 2, msg: "stategate serve: " + err.Error()}
	}
	// The state directory holds the default store, the generated admin token and the
	// record the admin commands find the gateway by; without one, each must be given.
	a.stateDir, err = stateDir()
	if err != nil && (o.store == "" || (a.admin == defaultAdmin && !a.adminSet)) {
		return &exitError{code: 2, msg: "stategate serve: " + err.Error()}
	}
	if o.store == "" {
		if err := os.MkdirAll(a.stateDir, 0o700); err != nil {
			return fmt.Errorf("state directory[%s]: %w", a.stateDir, err)
		}
		o.store = "bolt:" + filepath.Join(a.stateDir, o.name+".db")
	}
	cfg, eng, err := loadValidated(*cfgPath, logger)
	if err != nil {
		return err
	}
	return serveWithOps(ctx, *cfgPath, cfg, eng, upstream, o, a, logger, stdout)
}

// functionNames lists the plugin's exports `stategate call` runs.
func functionNames() string {
	names := make([]string, len(abi.Functions))
	for i, f := range abi.Functions {
		names[i] = f.Name()
	}
	return strings.Join(names, ", ")
}

// newLogger is serve's and stdio's logger on w (stderr): text or JSON.
func newLogger(format string, w io.Writer) *slog.Logger {
	var logger *slog.Logger
	if format == "json" {
		// The text handler quotes every value that holds a control (strconv); the JSON
		// one escapes C0 controls only: termsafe.Writer escapes DEL, C1 and bidi controls
		// too, so a tool name or an upstream's error cannot act on a terminal tailing it.
		logger = slog.New(slog.NewJSONHandler(termsafe.Writer(w), &slog.HandlerOptions{Level: slog.LevelInfo}))
	} else {
		logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return logger
}
