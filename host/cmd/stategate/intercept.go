package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/stategate/stategate/host/intercept"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

const interceptUsage = "usage: stategate intercept --config FILE [--listen 127.0.0.1:8090] [--store bolt:stategate-intercept.db|memory|redis://HOST:PORT/DB] [--plugin FILE]"

// cmdIntercept serves the hook endpoints for Docker's MCP gateway's interceptors.
func cmdIntercept(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("intercept", stderr)
	cfgPath := fs.String("config", "", "configuration file (JSON or YAML)")
	var o serveOptions
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8090", "address to listen on")
	fs.StringVar(&o.store, "store", "bolt:stategate-intercept.db", "state store: bolt:PATH, memory, or redis://HOST:PORT/DB")
	fs.StringVar(&o.plugin, "plugin", defaultPlugin, pluginUsage)
	fs.BoolVar(&o.interruptible, "interruptible", false, "stop plugin calls at their deadline (hard), at about 10x the cost per call")
	fs.StringVar(&o.origins, "allowed-origins", "", "comma-separated browser origins allowed to call the hooks (default: loopback origins only)")
	fs.StringVar(&o.hosts, "allowed-hosts", "", "comma-separated Host names the listener answers to besides loopback names")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	if *cfgPath == "" || fs.NArg() != 0 {
		return &exitError{code: 2, msg: interceptUsage}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	eng, err := validate(*cfgPath, cfg)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for _, w := range eng.Warnings() {
		logger.Warn("config", "warning", w.String())
	}
	rt, err := loadPlugin(ctx, o.plugin, logger, o.interruptible)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	pool, err := wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 2 * runtime.GOMAXPROCS(0), Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer pool.Close(context.Background())
	st, err := store.Open(ctx, o.store, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	h, err := intercept.New(intercept.Options{Plugin: pool, Config: cfg, State: store.StateOf(st), Logger: logger,
		Origins: o.originPolicy(ln.Addr())})
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintf(stdout, "stategate: intercepting on http://%s (hooks /before and /after; store %s)\n", ln.Addr(), o.store)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
