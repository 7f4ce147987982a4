package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/stategate/stategate/exchange/stats"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/demo"
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	var o serveOptions
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "gateway address")
	fs.StringVar(&o.plugin, "plugin", defaultPlugin, pluginUsage)
	o.store = "memory"
	upListen := fs.String("upstream-listen", "127.0.0.1:3001", "demo upstream address")
	upstreamOnly := fs.Bool("upstream-only", false, "serve only the demo upstream MCP server (for an Envoy in front)")
	noScript := fs.Bool("no-script", false, "skip the scripted session")
	once := fs.Bool("once", false, "exit after the scripted session")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	if *upstreamOnly {
		// --listen names the upstream's address in this mode.
		addr := *upListen
		if isSet(fs, "listen") {
			addr = o.listen
		}
		ln, err := net.Listen("tcp", addr)
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
	upLn, err := net.Listen("tcp", *upListen)
	if err != nil {
		return err
	}
	upSrv := &http.Server{Handler: demo.Handler(demo.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go upSrv.Serve(upLn)
	defer upSrv.Close()
	upstream := &url.URL{Scheme: "http", Host: upLn.Addr().String(), Path: "/mcp"}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := startGateway(ctx, demo.Config(), upstreamSpec{url: upstream, kind: "http"}, o, logger, hooks{})
	if err != nil {
		return err
	}
	defer r.cleanup()
	ln, gw := r.ln, r.gw
	endpoint := "http://" + ln.Addr().String() + "/mcp"
	fmt.Fprintf(stdout, "stategate demo: gateway %s -> upstream %s\n\n", endpoint, upstream)
	if !*noScript {
		if err := script(ctx, endpoint, stdout); err != nil {
			return fmt.Errorf("scripted session: %w", err)
		}
		fmt.Fprintf(stdout, "\ngateway stats: %d requests, %d tool calls, %d denied, %d invalidations, %d transitions, %d list_changed\n",
			gw.Stats.Get(stats.CountRequests), gw.Stats.Get(stats.CountToolCalls), gw.Stats.Get(stats.CountDenied),
			gw.Stats.Get(stats.CountInvalidations), gw.Stats.Get(stats.CountTransitions), gw.Stats.Get(stats.CountListChanged))
	}
	if *once {
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

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// script plays a short session through the gateway with the official MCP Go SDK client
// and prints what the model sees.
func script(ctx context.Context, endpoint string, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	changed := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "stategate-demo-script", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return err
	}
	defer cs.Close()
	step := func(title string) { fmt.Fprintf(out, "\n== %s\n", title) }
	listTools := func() error {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			return err
		}
		for _, t := range res.Tools {
			fmt.Fprintf(out, "  %-16s %s\n", t.Name, t.Description)
		}
		return nil
	}
	callTool := func(name string, args map[string]any) (*mcp.CallToolResult, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return nil, err
		}
		a, _ := json.Marshal(args)
		if len(a) > 80 {
			a = append(a[:77:77], "..."...)
		}
		fmt.Fprintf(out, "  -> %s %s%s\n", name, a, map[bool]string{true: "   (isError)"}[res.IsError])
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text := tc.Text
				if len(text) > 160 {
					text = text[:160] + "..."
				}
				fmt.Fprintf(out, "     %s\n", strings.ReplaceAll(text, "\n", "\n     "))
			}
		}
		return res, nil
	}
	step("tools/list: what the model sees (cache hints; cart tools the workflow does not allow yet are hidden)")
	if err := listTools(); err != nil {
		return err
	}
	step("a mutation: its result starts with the invalidation block")
	tasks, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "tasks.list", Arguments: map[string]any{}})
	if err != nil {
		return err
	}
	id := firstID(tasks)
	if _, err := callTool("tasks.update", map[string]any{"id": id, "status": "done"}); err != nil {
		return err
	}
	step("a call out of order: denied by the gate, the upstream never runs")
	if _, err := callTool("cart.pay", map[string]any{"amount": 10}); err != nil {
		return err
	}
	step("the workflow advances: add an item, and the client is told the tool list changed")
	if _, err := callTool("cart.add_item", map[string]any{"sku": "coffee", "qty": 1}); err != nil {
		return err
	}
	select {
	case <-changed:
		fmt.Fprintln(out, "  <- notifications/tools/list_changed")
	case <-time.After(2 * time.Second):
		fmt.Fprintln(out, "  (no list_changed notification seen)")
	}
	if err := listTools(); err != nil {
		return err
	}
	step("checkout, then pay: now allowed")
	if _, err := callTool("cart.checkout", map[string]any{}); err != nil {
		return err
	}
	if _, err := callTool("cart.pay", map[string]any{}); err != nil {
		return err
	}
	step("an oversized argument array: rejected before the upstream runs")
	rows := make([]any, 101)
	for i := range rows {
		rows[i] = map[string]any{"n": i}
	}
	if _, err := callTool("sprints.create", map[string]any{"name": "big", "tags": rows}); err != nil {
		return err
	}
	return nil
}

// firstID returns the id of the first task a tasks.list result names.
func firstID(res *mcp.CallToolResult) string {
	var sc struct {
		Tasks []struct {
			ID string `json:"id"`
		} `json:"tasks"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if json.Unmarshal(b, &sc) == nil && len(sc.Tasks) > 0 {
		return sc.Tasks[0].ID
	}
	return "T1"
}
