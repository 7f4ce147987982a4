package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// TestForward_collapsedAnswerEndsAtItsMessage: a client that takes only JSON gets the
// answer an upstream sent as an event stream as soon as its message came, not when the
// stream ends (here it never does while the client waits).
func TestForward_collapsedAnswerEndsAtItsMessage(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	accept := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept <- r.Header.Get("Accept")
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}\n\n")
		w.(http.Flusher).Flush()
		select { // the stream stays open
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	ctx := context.Background()
	cfg := counterConfig(1)
	pool, err := wasmrt.NewPool(ctx, pluginRuntime(t), cfg, wasmrt.PoolOptions{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(ctx)
	u, _ := url.Parse(up.URL + "/mcp")
	gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: cfg, Store: store.NewMemory(store.Options{}),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), `"tools":[]`) {
		t.Fatalf("got %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if a := <-accept; a != "application/json, text/event-stream" {
		t.Fatalf("the upstream was sent Accept %q", a)
	}
}

// TestForward_clientLeavingCancelsCallThatMovesNothing: a tools/call that cannot move a
// workflow runs on the handler's goroutine; when its client leaves, the upstream request
// is cancelled at once and the handler returns.
func TestForward_clientLeavingCancelsCallThatMovesNothing(t *testing.T) {
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // the server watches the connection once the body is read
		close(arrived)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}))
	defer up.Close()
	ctx := context.Background()
	pool, err := wasmrt.NewPool(ctx, pluginRuntime(t), pathsConfig, wasmrt.PoolOptions{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(ctx)
	u, _ := url.Parse(up.URL + "/mcp")
	gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: pathsConfig, Store: store.NewMemory(store.Options{}),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gw.ServeHTTP(w, r)
		close(returned)
	}))
	defer srv.Close()
	cctx, leave := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(cctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader(ungatedCallBody))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	go func() {
		<-arrived
		leave()
	}()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the call answered; want the client's request cancelled")
	}
	for name, ch := range map[string]chan struct{}{"the upstream request cancelled": cancelled, "the handler returned": returned} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("client left: %s: not within 5s", name)
		}
	}
}

// TestForward_timeoutOfCallThatMovesNothing: a tools/call that cannot move a workflow and
// outlasts its timeout is answered TOOL_TIMEOUT at the timeout, its upstream request is
// cancelled, and the handler returns.
func TestForward_timeoutOfCallThatMovesNothing(t *testing.T) {
	cancelled := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // the server watches the connection once the body is read
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}))
	defer up.Close()
	cfg := []byte(strings.Replace(string(pathsConfig), `"workflows"`, `"limits":{"tools":{"records.op2":{"timeoutMs":200}}},"workflows"`, 1))
	ctx := context.Background()
	pool, err := wasmrt.NewPool(ctx, pluginRuntime(t), cfg, wasmrt.PoolOptions{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(ctx)
	u, _ := url.Parse(up.URL + "/mcp")
	gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: cfg, Store: store.NewMemory(store.Options{}),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gw.ServeHTTP(w, r)
		close(returned)
	}))
	defer srv.Close()
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(ungatedCallBody))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `TOOL_TIMEOUT`) || time.Since(start) > 5*time.Second {
		t.Fatalf("after %s: %d %s", time.Since(start), resp.StatusCode, body)
	}
	for name, ch := range map[string]chan struct{}{"the upstream request cancelled": cancelled, "the handler returned": returned} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("timeout: %s: not within 5s", name)
		}
	}
}
