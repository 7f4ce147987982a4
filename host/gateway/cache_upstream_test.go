package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keyedUpstream is an MCP server (official Go SDK) whose answers depend on exactly what a
// response cache must key by:
//
//   - whoami: the Authorization, X-User and X-Tenant headers it saw (every value);
//   - ids.get: its arguments' raw JSON text as it arrived, byte for byte;
//   - items.list: how many items there were when the call began; with holdList armed, the
//     next call waits for release before it answers;
//   - items.add: adds an item.
type keyedUpstream struct {
	srv   *mcp.Server
	items atomic.Int64

	mu      sync.Mutex
	hold    chan struct{} // the next items.list waits for it to close
	started chan struct{} // closed once the held items.list began
}

func newKeyedUpstream() *keyedUpstream {
	u := &keyedUpstream{srv: mcp.NewServer(&mcp.Implementation{Name: "keyed", Version: "1"}, nil)}
	obj := &mcp.Tool{InputSchema: json.RawMessage(`{"type":"object"}`)}
	tool := func(name string) *mcp.Tool { t := *obj; t.Name = name; return &t }
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	u.srv.AddTool(tool("whoami"), func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		h := req.Extra.Header
		return text("auth=" + strings.Join(h.Values("Authorization"), "|") + " user=" + strings.Join(h.Values("X-User"), "|") +
			" tenant=" + strings.Join(h.Values("X-Tenant"), "|")), nil
	})
	u.srv.AddTool(tool("ids.get"), func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("args=" + string(req.Params.Arguments)), nil
	})
	u.srv.AddTool(tool("items.list"), func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := u.items.Load()
		u.mu.Lock()
		hold, started := u.hold, u.started
		u.hold, u.started = nil, nil
		u.mu.Unlock()
		if hold != nil {
			close(started)
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		return text("items=" + strconv.FormatInt(n, 10)), nil
	})
	u.srv.AddTool(tool("items.add"), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("items=" + strconv.FormatInt(u.items.Add(1), 10)), nil
	})
	return u
}

// holdList makes the next items.list wait until release is called; started is closed once
// that call has read the item count.
func (u *keyedUpstream) holdList() (started <-chan struct{}, release func()) {
	hold, s := make(chan struct{}), make(chan struct{})
	u.mu.Lock()
	u.hold, u.started = hold, s
	u.mu.Unlock()
	var once sync.Once
	return s, func() { once.Do(func() { close(hold) }) }
}

func (u *keyedUpstream) handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
}

// keyedConfig caches whoami, ids.* and items.list; items.add invalidates items.*. cache is
// the cache section's JSON, principal the principal header ("" for none).
func keyedConfig(cache, principal string) []byte {
	cfg := `{"version":1,"stateSync":{"defaults":{"cacheControl":"no-store"},"policies":[
		{"match":"whoami","cacheControl":"immutable"},
		{"match":"ids.*","cacheControl":"immutable"},
		{"match":"items.list","cacheControl":"immutable"},
		{"match":"items.add","cacheControl":"no-store","invalidates":["items.*"]}]},
	 "cache":` + cache
	if principal != "" {
		cfg += `,"principal":{"header":"` + principal + `"}`
	}
	return []byte(cfg + "}")
}

// withHeaders is an http.RoundTripper that sets headers on every request.
type withHeaders struct {
	h    http.Header
	base http.RoundTripper
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header[k] = v
	}
	return w.base.RoundTrip(r)
}

// connectAs connects a session-era client (official Go SDK) that sends h on every request.
func (e *env) connectAs(t *testing.T, h http.Header) *client {
	t.Helper()
	c := &client{changed: make(chan struct{}, 16)}
	mc := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: &http.Client{Transport: withHeaders{h, http.DefaultTransport}}}
	cs, err := mc.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: sessionEra})
	if err != nil {
		t.Fatalf("connect with %v: %v", h, err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

// callText calls tool and returns its text; a failed call fails t.
func (c *client) callText(t *testing.T, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	res := c.call(t, tool, args)
	if res.IsError {
		t.Fatalf("%s: %q", tool, texts(res))
	}
	return strings.Join(texts(res), ""), res
}
