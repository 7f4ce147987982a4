package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/host/demo"
)

// DemoOptions are `stategate demo`'s own flags.
type DemoOptions struct {
	UpstreamListen string // the demo upstream's address
	UpstreamOnly   bool   // serve only the demo upstream (on UpstreamListen)
	NoScript       bool   // skip the scripted session
	Once           bool   // exit after the scripted session
}

// Demo runs `stategate demo`: the demo upstream MCP server (host/demo), a gateway in front
// of it with the demo configuration (memory store), and a scripted session through it,
// then serves until ctx ends (d.Once: returns after the script).
func Demo(ctx context.Context, o Options, d DemoOptions, stdout io.Writer) error {
	o.Store = "memory"
	if d.UpstreamOnly {
		ln, err := net.Listen("tcp", d.UpstreamListen)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: demo.Handler(demo.Options{}), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		fmt.Fprintf(stdout, "demo upstream MCP server: http://%s/mcp\n", ln.Addr())
		<-ctx.Done()
		return nil
	}
	upLn, err := net.Listen("tcp", d.UpstreamListen)
	if err != nil {
		return err
	}
	upSrv := &http.Server{Handler: demo.Handler(demo.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go upSrv.Serve(upLn)
	defer upSrv.Close()
	upstream := &url.URL{Scheme: "http", Host: upLn.Addr().String(), Path: "/mcp"}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := startGateway(ctx, demo.Config(), Upstream{URL: upstream, Kind: "http"}, o, logger, hooks{})
	if err != nil {
		return err
	}
	defer r.cleanup()
	ln, gw := r.ln, r.gw
	endpoint := "http://" + ln.Addr().String() + "/mcp"
	fmt.Fprintf(stdout, "stategate demo: gateway %s -> upstream %s\n\n", endpoint, upstream)
	if !d.NoScript {
		if err := demo.Script(ctx, endpoint, stdout); err != nil {
			return fmt.Errorf("scripted session: %w", err)
		}
		fmt.Fprintf(stdout, "\ngateway stats: %d requests, %d tool calls, %d denied, %d invalidations, %d transitions, %d list_changed\n",
			gw.Stats.Get(stats.CountRequests), gw.Stats.Get(stats.CountToolCalls), gw.Stats.Get(stats.CountDenied),
			gw.Stats.Get(stats.CountInvalidations), gw.Stats.Get(stats.CountTransitions), gw.Stats.Get(stats.CountListChanged))
	}
	if d.Once {
		return nil
	}
	fmt.Fprintf(stdout, `
The gateway keeps serving. Connect any MCP client to it, for example MCP Inspector:
  npx @modelcontextprotocol/inspector   (transport: Streamable HTTP, URL: %s)
Press Ctrl-C to stop.
`, endpoint)
	<-ctx.Done()
	return nil
}
