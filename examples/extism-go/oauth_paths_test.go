package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/oauth"
)

// rawGet sends GET path as it is (no client cleans or re-encodes it) and reads the answer.
func rawGet(t *testing.T, addr, path string, h ...string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", path, addr, strings.Join(h, ""))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// pathRecorder is an upstream that answers every request with protected-resource metadata
// naming resource and records the paths (as sent) it was asked for.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
	srv   *httptest.Server
}

func newPathRecorder(t *testing.T, resource func(base string) string) *pathRecorder {
	p := &pathRecorder{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.paths = append(p.paths, r.RequestURI+" fwd="+r.Header.Get("X-Forwarded-Host")+r.Header.Get("Forwarded"))
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"resource":"`+resource(p.srv.URL)+`"}`)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pathRecorder) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.paths...)
}

// gatewayOn serves the built module through this host in front of upstream, its public URL
// its own listener's; it answers the listener's address.
func gatewayOn(t *testing.T, upstream string) string {
	t.Helper()
	var h *Host
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	var err error
	h, err = New(context.Background(), Options{Module: loadModule(t), Config: exchangetest.Config("sample.json"), Upstream: upstream, PublicURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return srv.Listener.Addr().String()
}

// TestHost_discoveryPathRefused: in front of an upstream URL without a path (whose
// path-suffixed documents keep the client's suffix), a document's path that could resolve
// to another at the upstream's origin (dot segments raw or encoded, empty segments,
// backslashes, encoded slashes) is answered 404, the Go gateway's bytes, and reaches
// nothing; a clean one reaches the document, the client's forwarding headers dropped.
func TestHost_discoveryPathRefused(t *testing.T) {
	up := newPathRecorder(t, func(base string) string { return base + "/mcp" })
	addr := gatewayOn(t, up.srv.URL)
	for _, p := range []string{
		"/.well-known/oauth-protected-resource/%2e%2e/%2e%2e/admin?x=1",
		"/.well-known/openid-configuration/../../internal/metrics",
		"/.well-known/oauth-authorization-server/..\\..\\debug",
		"/.well-known/oauth-authorization-server/..%2F..%2Fdebug",
		"/.well-known/oauth-protected-resource//internal",
	} {
		resp, body := rawGet(t, addr, p, "Authorization: Bearer client-token\r\n")
		if want := "Not Found: " + oauth.ErrDiscoveryPath.Error() + "\n"; resp.StatusCode != 404 || body != want {
			t.Errorf("GET %s: %d %q; want 404 %q", p, resp.StatusCode, body, want)
		}
	}
	if got := up.seen(); len(got) != 0 {
		t.Fatalf("the upstream was asked for %q", got)
	}
	resp, body := rawGet(t, addr, "/.well-known/oauth-protected-resource/mcp", "X-Forwarded-Host: evil.example\r\nForwarded: host=evil.example\r\n")
	if resp.StatusCode != 200 || !strings.Contains(body, `"resource":"http://`+addr+`/mcp"`) {
		t.Errorf("a clean document: %d %s", resp.StatusCode, body)
	}
	if got := up.seen(); len(got) != 1 || got[0] != "/.well-known/oauth-protected-resource/mcp fwd=" {
		t.Errorf("the upstream saw %q; want the document without the client's forwarding headers", got)
	}
}

// TestHost_discoveryEncodedPath: a client path with percent-encoding is read decoded, as
// the Go gateway reads r.URL.Path: the resource names it encoded once, as the official
// clients compare it.
func TestHost_discoveryEncodedPath(t *testing.T) {
	up := newPathRecorder(t, func(base string) string { return base + "/mcp" })
	addr := gatewayOn(t, up.srv.URL+"/mcp")
	resp, body := rawGet(t, addr, "/.well-known/oauth-protected-resource/team%20a/mcp")
	if want := `{"resource":"http://` + addr + `/team%20a/mcp"}`; resp.StatusCode != 200 || body != want {
		t.Errorf("%d %s; want %s", resp.StatusCode, body, want)
	}
	if got := up.seen(); len(got) != 1 || !strings.HasPrefix(got[0], "/.well-known/oauth-protected-resource/mcp ") {
		t.Errorf("the upstream saw %q", got)
	}
}

// TestModule_discoveryNeedsUpstream: a module without its upstream option (manifest.json's,
// a page's) routes no discovery, publicUrl or not: a document's request, dot segments and
// all, is forwarded as any GET, to be mapped onto the host's MCP endpoint, never as a path
// at the origin; and answers are not read for challenges that would name documents it does
// not route.
func TestModule_discoveryNeedsUpstream(t *testing.T) {
	h, err := New(context.Background(), Options{Module: loadModule(t), Config: exchangetest.Config("sample.json"), PublicURL: "https://gw.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	for _, p := range []string{"/.well-known/oauth-protected-resource/%2e%2e/%2e%2e/admin?x=1", "/.well-known/oauth-protected-resource/mcp"} {
		d, _, err := h.call("http_request", map[string]any{"method": "GET", "path": p, "waitedMs": 0, "headers": [][2]string{{"Host", "127.0.0.1"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if str(d, "do") != "forward" || d["origin"] != nil || str(d, "path") != p {
			b, _ := json.Marshal(d)
			t.Errorf("GET %s: %s; want a forward of the path as it came, without origin", p, b)
		}
	}
	d, _, err := h.call("http_request", map[string]any{"method": "POST", "path": "/mcp", "waitedMs": 0, "headers": [][2]string{{"Host", "127.0.0.1"},
		{"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}}}, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil || str(d, "do") != "forward" || string(d["rewrite"]) != "false" {
		t.Errorf("a notification: %s, %v; want a forward passed through unread", js(d), err)
	}
}
