// Package demo is the demo upstream MCP server of `stategate demo`: a handful of tools over an
// in-memory store (sprints and tasks, a shopping cart, static lists, and tools that exercise
// the gateway's limits), built on the official MCP Go SDK and served over Streamable HTTP.
//
// Config returns the sample gateway configuration written for these tools.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"net/http"
	"sync"
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
	h := http.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{
			JSONResponse: opts.JSONResponse,
			Stateless:    opts.Stateless,
			// A 2026-07-28 request lives exactly as long as its POST: when the client goes
			// away, the handler's context is cancelled (slow.wait stops sleeping).
			PropagateRequestCancellation: true,
		}))
	if opts.Stateless {
		// The SDK propagates the POST's cancellation only for 2026-07-28 requests. In
		// stateless mode a session-era client's notifications/cancelled arrives in another
		// POST (another throwaway session) and cannot reach the call, so tie every handler
		// to its own POST instead: a call ends when its HTTP request does.
		rc := &requestContexts{}
		srv.AddReceivingMiddleware(rc.middleware)
		h = rc.wrap(h)
	}
	return h
}

// requestTokenHeader carries, from the HTTP layer to the MCP handlers (which see the
// request's headers but not its context), a token naming the POST a call arrived on.
const requestTokenHeader = "X-Stategate-Demo-Request"

type requestContexts struct{ m sync.Map } // token -> context.Context of the POST

func (rc *requestContexts) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(requestTokenHeader) // never one a client made up
		if r.Method == http.MethodPost {
			tok := rand.Text()
			r.Header.Set(requestTokenHeader, tok)
			rc.m.Store(tok, r.Context())
			defer rc.m.Delete(tok)
		}
		h.ServeHTTP(w, r)
	})
}

func (rc *requestContexts) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if extra := req.GetExtra(); extra != nil && extra.Header != nil {
			if v, ok := rc.m.Load(extra.Header.Get(requestTokenHeader)); ok {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				stop := context.AfterFunc(v.(context.Context), cancel)
				defer stop()
			}
		}
		return next(ctx, method, req)
	}
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
