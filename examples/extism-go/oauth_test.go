package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/stategate/stategate/host/demo"
)

// OAuth discovery through this host, the rules all the module's: the upstream is the demo
// server behind the official Go SDK's RequireBearerToken and ProtectedResourceMetadataHandler
// (RFC 9728), the client side the SDK's oauthex discovery (which refuses metadata whose
// resource is not the URL the client used) and its MCP client with a bearer token.

const oauthToken = "tok-extism-go-oauth"

// oauthUpstream is an OAuth-protected MCP server; it counts the requests to its MCP endpoint.
type oauthUpstream struct {
	srv      *httptest.Server
	mu       sync.Mutex
	auths    []string
	metadata string // when set, the metadata document answered instead of the SDK's
}

func newOAuthUpstream(t *testing.T) *oauthUpstream {
	u := &oauthUpstream{}
	mux := http.NewServeMux()
	u.srv = httptest.NewServer(mux)
	t.Cleanup(u.srv.Close)
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if tok != oauthToken {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Scopes: []string{"mcp"}, Expiration: time.Now().Add(time.Hour)}, nil
	}
	prm := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: u.srv.URL + "/mcp", AuthorizationServers: []string{"https://auth.example.com"}, ScopesSupported: []string{"mcp"}})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		if u.metadata != "" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, u.metadata)
			return
		}
		prm.ServeHTTP(w, r)
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"issuer":"`+u.srv.URL+`","authorization_endpoint":"`+u.srv.URL+`/authorize","response_types_supported":["code"]}`)
	})
	mcpHandler := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: u.srv.URL + "/.well-known/oauth-protected-resource/mcp"})(demo.Handler(demo.Options{}))
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	}))
	return u
}

func (u *oauthUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auths...)
}

// oauthHost is this host in front of up, with its own listener's origin as the public URL.
func oauthHost(t *testing.T, up *oauthUpstream) string {
	t.Helper()
	var h *Host
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	var err error
	h, err = New(context.Background(), Options{Module: loadModule(t), Config: demo.Config(), Upstream: up.srv.URL + "/mcp", PublicURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return srv.URL
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func send(t *testing.T, method, url, body string, h map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func metadataURL(t *testing.T, h http.Header) string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if v := c.Params["resource_metadata"]; v != "" {
			return v
		}
	}
	t.Fatalf("no resource_metadata in %q", h.Values("WWW-Authenticate"))
	return ""
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp := send(t, http.MethodGet, url, "", nil)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %q %.80s; want 200 application/json", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return string(b)
}

// TestHost_oauthDiscovery: a client without a token is challenged with the host's metadata
// URL (for the path it used), finds the metadata there with the host's URL as the resource,
// and the authorization server's metadata unchanged, without reaching the MCP endpoint;
// with the token the official client reaches the upstream with its Authorization header
// intact; the challenges on an admitted call, a GET and a DELETE name the host too.
func TestHost_oauthDiscovery(t *testing.T) {
	up := newOAuthUpstream(t)
	gw := oauthHost(t, up)
	ctx := context.Background()
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

	for _, path := range []string{"/mcp", "/tenant/a"} { // the host maps every path onto the upstream's /mcp
		resp := send(t, http.MethodPost, gw+path, initialize, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: initialize without a token: %d; want 401", path, resp.StatusCode)
		}
		meta := metadataURL(t, resp.Header)
		if want := gw + "/.well-known/oauth-protected-resource" + path; meta != want {
			t.Fatalf("%s: resource_metadata %q; want %q", path, meta, want)
		}
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, meta, gw+path, http.DefaultClient)
		if err != nil {
			t.Fatalf("%s: the SDK's discovery through the host: %v", path, err)
		}
		if len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != "https://auth.example.com" || prm.ScopesSupported[0] != "mcp" {
			t.Errorf("%s: metadata changed beyond its resource: %+v", path, prm)
		}
	}
	if asm := getBody(t, gw+"/.well-known/oauth-authorization-server"); !strings.Contains(asm, `"issuer":"`+up.srv.URL+`"`) {
		t.Errorf("authorization server metadata: %s", asm)
	}
	if n := len(up.seen()); n != 2 {
		t.Errorf("the MCP endpoint was reached %d times; want twice (the initializes: discovery never reaches it)", n)
	}

	mc := mcp.NewClient(&mcp.Implementation{Name: "extism-go-oauth", Version: "1"}, nil)
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw + "/mcp", HTTPClient: &http.Client{Transport: bearer{oauthToken}}}, nil)
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cart.add_item", Arguments: map[string]any{"sku": "tea"}})
	if err != nil || res.IsError {
		t.Fatalf("cart.add_item: %v %+v", err, res)
	}
	auths := up.seen()
	if len(auths) < 5 {
		t.Fatalf("the upstream saw %d requests; want the two initializes, then initialize, initialized and the call", len(auths))
	}
	for i, a := range auths[2:] {
		if a != "Bearer "+oauthToken {
			t.Errorf("request %d reached the upstream with Authorization %q", i+2, a)
		}
	}

	want := gw + "/.well-known/oauth-protected-resource/mcp"
	for _, m := range []struct{ method, body string }{
		{http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"x"}}}`},
		{http.MethodGet, ""},
		{http.MethodDelete, ""},
	} {
		resp := send(t, m.method, gw+"/mcp", m.body, map[string]string{"Mcp-Session-Id": cs.ID(), "MCP-Protocol-Version": "2025-06-18", "Authorization": "Bearer wrong"})
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d; want 401", m.method, resp.StatusCode)
			continue
		}
		if got := metadataURL(t, resp.Header); got != want {
			t.Errorf("%s: resource_metadata %q; want %q", m.method, got, want)
		}
	}
}

// TestHost_oauthMalformedMetadataPassesUnchanged: metadata the module cannot read reaches the
// client byte for byte (fail open, as the gateway).
func TestHost_oauthMalformedMetadataPassesUnchanged(t *testing.T) {
	for _, doc := range []string{`{"resource":5}`, `not json`, `{"resource":"http://a/mcp","resource":"http://b/mcp"}`, strings.Repeat(`[`, 100000)} {
		up := newOAuthUpstream(t)
		up.metadata = doc
		gw := oauthHost(t, up)
		if got := getBody(t, gw+"/.well-known/oauth-protected-resource/mcp"); got != doc {
			t.Errorf("metadata %.40q reached the client as %.40q", doc, got)
		}
	}
}

// TestHost_oauthBadPublicURL: a publicUrl the module cannot read is a configuration error
// that every request gets (500, INVALID_CONFIG), never a silent fallback to no rewriting.
func TestHost_oauthBadPublicURL(t *testing.T) {
	for _, public := range []string{"gateway.example", "https://gw.example/mcp", "ftp://gw.example"} {
		h, err := New(context.Background(), Options{Module: loadModule(t), Config: demo.Config(), Upstream: "http://127.0.0.1:1/mcp", PublicURL: public})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(context.Background()) })
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		resp := send(t, http.MethodGet, srv.URL+"/.well-known/oauth-protected-resource/mcp", "", nil)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), "INVALID_CONFIG") || !strings.Contains(string(b), "publicUrl") {
			t.Errorf("publicUrl %q: %d %s; want 500 INVALID_CONFIG naming publicUrl", public, resp.StatusCode, b)
		}
	}
}
