// Package demo is the demo upstream MCP server of `stategate demo`: a handful of tools over an
// in-memory store (sprints and tasks, a shopping cart, static lists, and tools that exercise
// the gateway's limits), built on the official MCP Go SDK and served over Streamable HTTP.
//
// Config returns the sample gateway configuration written for these tools.
package demo

import (
	"bytes"
	_ "embed"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

//go:embed config.json
var configJSON []byte

// Config returns the sample stategate configuration for the demo tools (JSON). The slice is
// a fresh copy on every call.
func Config() []byte { return bytes.Clone(configJSON) }

// Options configures the demo server.
type Options struct {
	JSONResponse bool          // answer POSTs as application/json instead of text/event-stream
	Stateless    bool          // no Mcp-Session-Id (SDK stateless mode)
	SlowDelay    time.Duration // how long tools "slow.wait" sleeps (default 2s)
}

// DefaultSlowDelay is how long slow.wait sleeps when Options.SlowDelay is zero.
const DefaultSlowDelay = 2 * time.Second

// Version is the version the demo server reports in its implementation info.
const Version = "1.0.0"

// NewServer returns the demo MCP server (a fresh in-memory store per call).
func NewServer(opts Options) *mcp.Server {
	srv, _ := newServer(opts)
	return srv
}

// Handler returns the Streamable HTTP handler serving it at any path.
//
// The server behind the handler is created once: every session (or, in stateless mode,
// every request) shares its store. The SDK's DNS-rebinding protection stays on: a request
// that arrives on a loopback address with a non-loopback Host header is answered 403.
func Handler(opts Options) http.Handler {
	return handlerFor(NewServer(opts), opts)
}

func handlerFor(srv *mcp.Server, opts Options) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{
			JSONResponse: opts.JSONResponse,
			Stateless:    opts.Stateless,
			// A 2026-07-28 request lives exactly as long as its POST: when the client goes
			// away, the handler's context is cancelled (slow.wait stops sleeping).
			PropagateRequestCancellation: true,
		})
}

func newServer(opts Options) (*mcp.Server, *store) {
	st := newStore(opts)
	srv := mcp.NewServer(&mcp.Implementation{
		Name:    "stategate-demo",
		Title:   "stategate demo upstream",
		Version: Version,
	}, &mcp.ServerOptions{
		Instructions: "Demo tools over an in-memory store: sprints and tasks, a shopping cart " +
			"(add_item, checkout, pay), static country and user lists, and tools that exercise " +
			"limits (bulk.import, slow.wait, reports.big).",
		// The tool set never changes, so the server does not claim tools.listChanged
		// (the SDK's default would); a gateway in front may add it.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	st.register(srv)
	return srv, st
}
