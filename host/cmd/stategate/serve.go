package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/host/configfile"
	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/host/serve"
	"github.com/stategate/stategate/host/stdio"
	"github.com/tidwall/gjson"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	cfgPath := fs.String("config", "", "configuration file (JSON or YAML)")
	up := fs.String("upstream", "", "URL of the MCP server to front (e.g. http://127.0.0.1:3001/mcp); or give a stdio server's command after --")
	upTransport := fs.String("upstream-transport", "auto", "the upstream URL's transport: streamable (Streamable HTTP), sse (the 2024-11-05 HTTP+SSE transport) or auto (sse when the path ends in /sse)")
	maxSessions := fs.Int("max-sessions", 16, "a stdio command or HTTP+SSE upstream: at most this many sessions at once (each a child process or an upstream SSE stream); one more initialize is answered 503")
	idle := fs.Duration("session-idle", 30*time.Minute, "a stdio command or HTTP+SSE upstream: a session with no request, call or GET stream for this long ends, and its child or upstream stream with it (0: never)")
	var o serve.Options
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&o.Name, "name", "", "this gateway's name: its default store file and admin record in the state directory are NAME.db and NAME.admin.json (default: from --listen, e.g. 127.0.0.1-8080)")
	fs.StringVar(&o.Store, "store", "", "state store (default: bolt:$XDG_STATE_HOME/stategate/NAME.db, else ~/.local/state/stategate/NAME.db): bolt:PATH (a file that survives restarts; PATH relative to the working directory), memory, redis://HOST:PORT/DB (shared by replicas), redis+cluster://HOST:PORT[,HOST:PORT...] (Redis Cluster) or redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER (a primary found through Sentinel)")
	fs.StringVar(&o.Plugin, "plugin", defaultPlugin, pluginUsage)
	fs.BoolVar(&o.Interruptible, "interruptible", false, "stop plugin calls at their deadline (hard), at about 10x the cost per call")
	fs.StringVar(&o.Origins, "allowed-origins", "", "comma-separated browser origins allowed to call the gateway (default: loopback origins only; * allows any)")
	fs.StringVar(&o.Hosts, "allowed-hosts", "", "comma-separated Host names the listener answers to besides loopback names (checked on loopback listeners, or whenever set)")
	fs.StringVar(&o.PublicURL, "public-url", "", "the address clients reach the gateway at (scheme://host[:port]); OAuth discovery documents and challenges name it instead of the upstream's (default: http:// and the listen address)")
	fs.BoolVar(&o.ListCache, "list-cache", false, "answer tools/list from the gateway's copy of the upstream's list while the upstream says it is fresh: a 2026-07-28 list for its ttlMs (per credential unless cacheScope is public), a session whose server declared listChanged while the gateway relays its GET stream; every list_changed ends every copy, on every replica")
	var a serve.OpsOptions
	fs.StringVar(&a.Admin, "admin", serve.DefaultAdmin, "admin listener address (probes, admin API, events, metrics, status page), or off; by default loopback on a free port with a generated token that `stategate tools` and the other admin commands find")
	fs.StringVar(&a.TokenFile, "admin-token-file", "", "file holding the admin bearer token (or set "+ops.TokenEnv+"); without one the admin listener must be loopback")
	fs.StringVar(&a.LogFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&a.Drain, "drain-timeout", 30*time.Second, "on SIGTERM, how long in-flight calls and transitions may take to finish")
	fs.IntVar(&a.History, "event-history", 10000, "how many events the admin listener keeps for replay (GET /admin/events?since=, stategate events --count); in the store file when the store is bolt")
	fs.DurationVar(&a.Probe, "probe-interval", 5*time.Second, "how often the store, the plugin and the upstream are probed (app state degraded/ready)")
	if err := fs.Parse(args); err != nil {
		return &exitError{Code: 2}
	}
	fs.Visit(func(f *flag.Flag) { a.AdminSet = a.AdminSet || f.Name == "admin" })
	var err error
	if *cfgPath == "" {
		return &exitError{Code: 2, Msg: "stategate serve: --config FILE is required: the configuration (JSON or YAML; examples/config/ has some to start from, `stategate serve --help` lists every flag)"}
	}
	if o.PublicURL != "" {
		if o.PublicURL, err = oauth.ParsePublicURL(o.PublicURL); err != nil {
			return &exitError{Code: 2, Msg: "stategate serve: --public-url: " + strings.TrimPrefix(err.Error(), "public url ")}
		}
	}
	if a.LogFormat != "text" && a.LogFormat != "json" {
		return &exitError{Code: 2, Msg: fmt.Sprintf("stategate serve: --log-format %q: want text or json", a.LogFormat)}
	}
	logger := serve.NewLogger(a.LogFormat, stderr)
	if *idle == 0 {
		*idle = -1 // upstream.Options: never
	}
	upstream, err := serve.ResolveUpstream(*up, *upTransport, fs.Args(), *maxSessions, *idle, logger)
	if err != nil {
		return &exitError{Code: 2, Msg: "stategate serve: " + err.Error()}
	}
	if upstream.Sessions != nil {
		defer upstream.Sessions.Close() // children end with the gateway
	}
	if o.Name, err = serve.GatewayName(o.Name, o.Listen); err != nil {
		return &exitError{Code: 2, Msg: "stategate serve: " + err.Error()}
	}
	// The state directory holds the default store, the generated admin token and the
	// record the admin commands find the gateway by; without one, each must be given.
	a.StateDir, err = serve.StateDir()
	if err != nil && (o.Store == "" || (a.Admin == serve.DefaultAdmin && !a.AdminSet)) {
		return &exitError{Code: 2, Msg: "stategate serve: " + err.Error()}
	}
	if o.Store == "" {
		if err := os.MkdirAll(a.StateDir, 0o700); err != nil {
			return fmt.Errorf("state directory[%s]: %w", a.StateDir, err)
		}
		o.Store = "bolt:" + filepath.Join(a.StateDir, o.Name+".db")
	}
	cfg, eng, err := serve.LoadValidated(*cfgPath, logger)
	if err != nil {
		return err
	}
	return serve.Run(ctx, *cfgPath, cfg, eng, upstream, o, a, logger, stdout)
}

// cmdStdio is `stategate stdio` (host/stdio): what a desktop client's mcpServers entry
// runs, the gateway in process with the client on stdin and stdout.
func cmdStdio(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("stdio", stderr)
	cfgPath := fs.String("config", "", "configuration file (JSON or YAML)")
	up := fs.String("upstream", "", "URL of an HTTP MCP server to front instead of a command after --")
	upTransport := fs.String("upstream-transport", "auto", "the upstream URL's transport: streamable, sse (2024-11-05 HTTP+SSE) or auto (sse when the path ends in /sse)")
	var o serve.Options
	fs.StringVar(&o.Name, "name", "", "this gateway's name: its admin record (with --admin) and default store file name (default: stdio-PID)")
	fs.StringVar(&o.Store, "store", "memory", "state store: memory (this process: the stdio session is one session), bolt:PATH, or redis://HOST:PORT/DB (see serve --help)")
	fs.StringVar(&o.Plugin, "plugin", defaultPlugin, pluginUsage)
	fs.BoolVar(&o.Interruptible, "interruptible", false, "stop plugin calls at their deadline (hard), at about 10x the cost per call")
	var a serve.OpsOptions
	fs.StringVar(&a.Admin, "admin", "off", "admin listener address (probes, admin API, events, metrics, status page), or off")
	fs.StringVar(&a.TokenFile, "admin-token-file", "", "file holding the admin bearer token (or set "+ops.TokenEnv+"); without one the admin listener must be loopback")
	fs.StringVar(&a.LogFormat, "log-format", "text", "log format (on stderr): text or json")
	fs.DurationVar(&a.Drain, "drain-timeout", 5*time.Second, "when stdin closes, how long calls in flight may take to finish")
	if err := fs.Parse(args); err != nil {
		return &exitError{Code: 2}
	}
	fs.Visit(func(f *flag.Flag) { a.AdminSet = a.AdminSet || f.Name == "admin" })
	if *cfgPath == "" {
		return &exitError{Code: 2, Msg: "stategate stdio: --config FILE is required: the configuration (JSON or YAML; examples/config/ has some to start from)"}
	}
	if a.LogFormat != "text" && a.LogFormat != "json" {
		return &exitError{Code: 2, Msg: fmt.Sprintf("stategate stdio: --log-format %q: want text or json", a.LogFormat)}
	}
	logger := serve.NewLogger(a.LogFormat, stderr)
	// One client: its session, and one spare for a client that initializes again (the
	// bridge ends the first) or for 2026-07-28 requests, which have no session. The client
	// may stay quiet for hours: its session never ends for idling (-1).
	upstream, err := serve.ResolveUpstream(*up, *upTransport, fs.Args(), 2, -1, logger)
	if err != nil {
		return &exitError{Code: 2, Msg: "stategate stdio: " + err.Error()}
	}
	if o.Name == "" {
		o.Name = "stdio-" + strconv.Itoa(os.Getpid())
	}
	if o.Name, err = serve.GatewayName(o.Name, ""); err != nil {
		return &exitError{Code: 2, Msg: "stategate stdio: " + err.Error()}
	}
	if a.Admin != "off" {
		if a.StateDir, err = serve.StateDir(); err != nil {
			a.StateDir = "" // no record: the admin commands then need --admin
		}
	}
	if a.Admin == "off" && o.Store == "memory" && operatorApprovals(*cfgPath) {
		// Nothing could decide a held call: no admin listener, and no other gateway on the store.
		logger.Warn("approvals for an operator hold calls until they time out: no operator can decide them without --admin ADDR (stategate approve-call and the status page then reach this process) or a store a gateway with an admin listener shares")
	}
	err = stdio.Run(ctx, stdio.Options{ConfigPath: *cfgPath, Upstream: upstream, Serve: o, Ops: a, Logger: logger}, stdin, stdout, stderr)
	if ended := (*stdio.EndedError)(nil); errors.As(err, &ended) {
		return &exitError{Code: 1, Msg: "stategate stdio: " + ended.Cause.Error()}
	}
	return err
}

// operatorApprovals reports whether the configuration at path has an approvals entry for
// an operator (false when it cannot be read: serve reports that itself).
func operatorApprovals(path string) bool {
	raw, err := configfile.Load(path)
	if err != nil {
		return false
	}
	found := false
	gjson.GetBytes(raw, "approvals").ForEach(func(_, e gjson.Result) bool {
		found = e.Get("by").Str == "operator"
		return !found
	})
	return found
}
