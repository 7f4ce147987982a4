package peers_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/exchange/listcache"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// The rows this package serves itself run as children: this test binary started again with
// childEnv naming the role (and upstreamEnv the upstream's URL, for the proxies), so that
// every row, like the peers, is a process of its own and none shares the load generator's
// Go runtime.
const (
	childEnv    = "STATEGATE_PEERS_CHILD"
	upstreamEnv = "STATEGATE_PEERS_UPSTREAM"
	wasmEnv     = "STATEGATE_PEERS_WASM"
	// profileEnv names a directory where each child of this package writes a CPU profile
	// of its whole life (ROLE.cpu.pprof), for `go tool pprof`.
	profileEnv = "STATEGATE_PEERS_CPUPROFILE"
)

// extraTools is how many tools the upstream has besides the demo's 14: 83 in all, the
// size of the measure (host/gateway's bigUpstream(69), the gateway benchmarks'
// server).
const extraTools = 69

// upstreamHandler is the benchmark's MCP server: the demo server (official Go SDK,
// Streamable HTTP, JSON answers, sessions) with extraTools more tools, as host/gateway's
// bigUpstream builds it.
func upstreamHandler() http.Handler {
	srv := demo.NewServer(demo.Options{})
	type in struct {
		ID string `json:"id" jsonschema:"record id"`
	}
	for i := 0; i < extraTools; i++ {
		mcp.AddTool(srv, &mcp.Tool{Name: fmt.Sprintf("records.op%d", i), Description: fmt.Sprintf("Operation %d on records. Returns the affected records.", i)},
			func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
			})
	}
	return declaresListChanged(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
}

// declaresListChanged makes the upstream's initialize result declare
// capabilities.tools.listChanged, as the SDK's servers do by default (the demo server opts
// out: its tools never change); without it no gateway that keeps a coherent copy may keep
// one of a session's list (stategate's list cache row). Only the initialize request (a POST
// without a session) is buffered; every other passes as it comes, for every row alike.
func declaresListChanged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if bytes.Contains(body, []byte(`"protocolVersion"`)) {
			body = bytes.Replace(body, []byte(`"tools":{}`), []byte(`"tools":{"listChanged":true}`), 1)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// passThroughConfig is stategate with no policies, no workflow and no limits of its own.
const passThroughConfig = `{"version": 1}`

// serveChild serves role on a free loopback port, writes its URL (ending in /mcp) as one
// line on stdout, and serves until stdin closes (the parent's end).
func serveChild(role string) {
	h, err := childHandler(role)
	if err != nil {
		fmt.Fprintf(os.Stderr, "peers child %s: %v\n", role, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Idle connections are kept as long as the run may leave a row idle between its
	// rounds (without IdleTimeout, ReadHeaderTimeout would close them after 10 s).
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 10 * time.Minute}
	go srv.Serve(ln)
	if dir := os.Getenv(profileEnv); dir != "" {
		if f, err := os.Create(filepath.Join(dir, role+".cpu.pprof")); err == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	end := make(chan struct{}, 2)
	go func() { bufio.NewReader(os.Stdin).ReadString('\n'); end <- struct{}{} }() // EOF when the parent ends
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() { <-term; end <- struct{}{} }() // or when it ends the process group
	<-end
}

func childHandler(role string) (http.Handler, error) {
	if role == "upstream" {
		return upstreamHandler(), nil
	}
	up, err := url.Parse(os.Getenv(upstreamEnv))
	if err != nil || up.Host == "" {
		return nil, fmt.Errorf("%s=%q: not an upstream URL", upstreamEnv, os.Getenv(upstreamEnv))
	}
	switch role {
	case "reverseproxy":
		// Seen on 2026-11-29 (Go 1.26, a loaded machine): 1 to 3 in 1000 tools/list answers
		// cut short ("unexpected EOF" at the client) because this proxy's own transport closed
		// its upstream connection mid-body ("use of closed network connection", the request's
		// context not cancelled); no other row showed it. Its ratios are over its valid
		// answers, and the report says how many failed.
		return &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(&url.URL{Scheme: up.Scheme, Host: up.Host})
				pr.Out.Host = ""
			},
			FlushInterval: -1,
		}, nil
	case "stategate-decorating":
		return stategate(up, demo.Config(), nil)
	case "stategate-decorating-listcache":
		return stategate(up, demo.Config(), &listcache.Config{})
	case "stategate-passthrough":
		return stategate(up, []byte(passThroughConfig), nil)
	}
	return nil, fmt.Errorf("unknown role %q", role)
}

// stategate is the gateway as the gateway benchmarks build it: the built engine module
// (build/stategate.wasm) in a pool of 8 instances, a memory store; lists: the list cache's
// configuration (nil: off), as `stategate serve --list-cache` gives it.
func stategate(up *url.URL, cfg []byte, lists *listcache.Config) (http.Handler, error) {
	wasm, err := os.ReadFile(os.Getenv(wasmEnv))
	if err != nil {
		return nil, fmt.Errorf("the engine module: %w (run make build)", err)
	}
	ctx := context.Background()
	rt, err := wasmrt.New(ctx, wasm, wasmrt.Options{})
	if err != nil {
		return nil, err
	}
	pool, err := wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 8})
	if err != nil {
		return nil, err
	}
	return gateway.New(gateway.Options{Upstream: up, Plugin: pool, Config: cfg, Store: store.NewMemory(store.Options{}), ListCache: lists})
}
