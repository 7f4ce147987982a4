package serve

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

// Intercept serves the hook endpoints for Docker's MCP gateway's interceptors
// (`stategate intercept`) with the configuration at cfgPath, until ctx ends.
func Intercept(ctx context.Context, cfgPath string, o Options, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	eng, err := Validate(cfgPath, cfg)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for _, w := range eng.Warnings() {
		logger.Warn("config", "warning", w.String())
	}
	rt, err := LoadPlugin(ctx, o.Plugin, logger, o.Interruptible)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	pool, err := wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 2 * runtime.GOMAXPROCS(0), Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer pool.Close(context.Background())
	st, err := store.Open(ctx, o.Store, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := net.Listen("tcp", o.Listen)
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
	fmt.Fprintf(stdout, "stategate: intercepting on http://%s (hooks /before and /after; store %s)\n", ln.Addr(), o.Store)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
