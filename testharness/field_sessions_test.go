package testharness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestField_gatewaySessions: the official TypeScript client through `stategate serve` in
// front of a stateless server on the official TypeScript SDK (field/stateless.mjs,
// sessionIdGenerator: undefined) and on the official Go SDK (StreamableHTTPOptions.Stateless):
// the session-keyed workflow of field/stateless.json advances, list_changed reaches the
// client, two clients get different sessions and separate states, DELETE ends a session and
// a later request with it gets 404 (field/sessions.mjs, one scenario each). The Go server
// also shows that no request carried a session id to it.
func TestField_gatewaySessions(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	config, err := os.ReadFile(filepath.Join(fieldDir, "stateless.json"))
	if err != nil {
		t.Fatal(err)
	}
	goServer, seen := fieldGoStateless(t)
	for _, up := range []struct{ name, url string }{
		{"typescript-sdk", fieldStateless(ctx, t)},
		{"go-sdk", goServer},
	} {
		t.Run(up.name, func(t *testing.T) {
			gw := fieldServe(ctx, t, bin, string(config), up.url)
			for _, scenario := range []string{"workflow", "list_changed", "two_clients", "delete"} {
				t.Run(scenario, func(t *testing.T) {
					t.Logf("%s", fieldNode(ctx, t, "sessions.mjs", "GATEWAY_URL="+gw.URL, "SCENARIO="+scenario))
				})
			}
		})
	}
	if ids, methods := seen(); len(ids) > 0 || len(methods) > 0 {
		t.Errorf("the Go server was sent Mcp-Session-Id %q and %q requests", ids, methods)
	}
}

// fieldGoStateless serves, on loopback, the tools of field/stateless.mjs that sessions.mjs
// uses (cart_add, cart_pay, echo, seen_session) from the official Go SDK in stateless mode.
// seen returns the Mcp-Session-Id values it was sent and the methods of its non-POST
// requests.
func fieldGoStateless(t *testing.T) (url string, seen func() (ids, methods []string)) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "stategate-field-go-stateless", Version: "1.0.0"}, nil)
	reply := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	type addIn struct {
		SKU string `json:"sku"`
	}
	type payIn struct {
		Amount float64 `json:"amount,omitempty"`
	}
	type echoIn struct {
		Text string `json:"text,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "cart_add", Description: "Add an item to the cart."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return reply("added " + in.SKU), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "cart_pay", Description: "Pay for the cart."},
		func(_ context.Context, _ *mcp.CallToolRequest, in payIn) (*mcp.CallToolResult, any, error) {
			return reply("paid " + strconv.FormatFloat(in.Amount, 'f', -1, 64)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return reply(in.Text), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "seen_session", Description: "The Mcp-Session-Id header the server was sent."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			v := "none"
			if req.Extra != nil && req.Extra.Header.Get("Mcp-Session-Id") != "" {
				v = req.Extra.Header.Get("Mcp-Session-Id")
			}
			return reply(v), nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var mu sync.Mutex
	var ids, methods []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if v := r.Header.Get("Mcp-Session-Id"); v != "" {
			ids = append(ids, v)
		}
		if r.Method != http.MethodPost {
			methods = append(methods, r.Method)
		}
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", func() ([]string, []string) {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ids...), append([]string(nil), methods...)
	}
}
