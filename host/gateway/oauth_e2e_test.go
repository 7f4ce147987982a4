package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// OAuth discovery through the gateway, with the official Go SDK on both sides: the upstream
// is the demo server behind the SDK's RequireBearerToken and ProtectedResourceMetadataHandler
// (RFC 9728), the client side is the SDK's oauthex discovery (which checks that the
// metadata's resource is the URL the client used) and its MCP client with a bearer token.

const oauthToken = "tok-3f9a1c-oauth-e2e"

// oauthUpstream is an MCP server that requires a bearer token, as the official Go SDK builds
// one; it records the Authorization header of every request to its MCP endpoint.
type oauthUpstream struct {
	srv      *httptest.Server
	mu       sync.Mutex
	auths    []string
	mcpHits  int
	metadata func(w http.ResponseWriter, r *http.Request) // replaces the SDK's metadata handler
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
		if u.metadata != nil {
			u.metadata(w, r)
			return
		}
		prm.ServeHTTP(w, r)
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"issuer":"`+u.srv.URL+`","authorization_endpoint":"`+u.srv.URL+`/authorize","token_endpoint":"`+u.srv.URL+`/token","response_types_supported":["code"]}`)
	})
	mcpHandler := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: u.srv.URL + "/.well-known/oauth-protected-resource/mcp"})(demo.Handler(demo.Options{}))
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mcpHits++
		u.mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	}))
	return u
}

func (u *oauthUpstream) seen() (auths []string, hits int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auths...), u.mcpHits
}

// oauthGateway is a gateway in front of up whose public URL is its own listener's.
func oauthGateway(t *testing.T, up *oauthUpstream) (*gateway.Gateway, string) {
	t.Helper()
	ctx := context.Background()
	pool, err := wasmrt.NewPool(ctx, pluginRuntime(t), demo.Config(), wasmrt.PoolOptions{Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(ctx) })
	var gw *gateway.Gateway
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { gw.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	upstream, _ := url.Parse(up.srv.URL + "/mcp")
	gw, err = gateway.New(gateway.Options{Upstream: upstream, Plugin: pool, Config: demo.Config(),
		Store: store.NewMemory(store.Options{}), PublicURL: srv.URL,
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	return gw, srv.URL
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestOAuth_discoveryThroughGateway: a client without a token is challenged with the
// gateway's metadata URL, finds the metadata there with the gateway's URL as the resource
// (the SDK refuses any other), and with a token reaches the upstream with its Authorization
// header intact. Without the fix the challenge names the upstream's address and the
// well-known path is forwarded to the MCP endpoint (401).
func TestOAuth_discoveryThroughGateway(t *testing.T) {
	up := newOAuthUpstream(t)
	_, gwURL := oauthGateway(t, up)
	ctx := context.Background()

	// 1. No token: 401 with a challenge that names the gateway.
	resp := rawPost(t, gwURL+"/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, "application/json, text/event-stream")
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("initialize without a token: %d; want 401", resp.StatusCode)
	}
	metaURL := challengeMetadataURL(t, resp.Header)
	if want := gwURL + "/.well-known/oauth-protected-resource/mcp"; metaURL != want {
		t.Fatalf("resource_metadata %q; want %q", metaURL, want)
	}

	// 2. The SDK's discovery finds the metadata there, for the gateway's URL.
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, metaURL, gwURL+"/mcp", http.DefaultClient)
	if err != nil {
		t.Fatalf("discovery through the gateway: %v", err)
	}
	if len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != "https://auth.example.com" || prm.ScopesSupported[0] != "mcp" {
		t.Errorf("metadata changed beyond its resource: %+v", prm)
	}
	// The authorization server's metadata (legacy discovery at the server's origin) passes
	// unchanged.
	asm := getBody(t, gwURL+"/.well-known/oauth-authorization-server", nil)
	if !strings.Contains(asm, `"issuer":"`+up.srv.URL+`"`) {
		t.Errorf("authorization server metadata: %s", asm)
	}
	if _, hits := up.seen(); hits != 1 {
		t.Errorf("the MCP endpoint was reached %d times; want once (discovery never reaches it)", hits)
	}

	// 3. With a token, the official client works through the gateway and the upstream sees
	// the header byte for byte, on a passed request (initialize) and an admitted call.
	mc := mcp.NewClient(&mcp.Implementation{Name: "oauth-e2e", Version: "1"}, nil)
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gwURL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{oauthToken}}}, nil)
	if err != nil {
		t.Fatalf("connect with a token: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cart.add_item", Arguments: map[string]any{"sku": "tea"}})
	if err != nil || res.IsError {
		t.Fatalf("cart.add_item: %v %+v", err, res)
	}
	auths, _ := up.seen()
	if len(auths) < 3 {
		t.Fatalf("the upstream saw %d requests; want initialize, initialized and the call", len(auths))
	}
	for i, a := range auths[1:] {
		if a != "Bearer "+oauthToken {
			t.Errorf("request %d reached the upstream with Authorization %q", i+1, a)
		}
	}

	// 4. A challenge on an admitted call (forwarded through the core) names the gateway too,
	// as does one on a GET stream and a DELETE (passed through).
	sid := cs.ID()
	for _, m := range []struct{ method, body string }{
		{http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"x"}}}`},
		{http.MethodGet, ""},
		{http.MethodDelete, ""},
	} {
		req, _ := http.NewRequest(m.method, gwURL+"/mcp", strings.NewReader(m.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		req.Header.Set("Authorization", "Bearer wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d; want 401", m.method, resp.StatusCode)
			continue
		}
		if got := challengeMetadataURL(t, resp.Header); got != metaURL {
			t.Errorf("%s: resource_metadata %q; want %q", m.method, got, metaURL)
		}
	}
}

// TestOAuth_publicURLNotFromHost: the documents name the configured public URL, whatever
// Host a request carries.
func TestOAuth_publicURLNotFromHost(t *testing.T) {
	up := newOAuthUpstream(t)
	_, gwURL := oauthGateway(t, up)
	body := getBody(t, gwURL+"/.well-known/oauth-protected-resource/mcp", map[string]string{"Host": "localhost:1", "X-Forwarded-Host": "evil.example"})
	if !strings.Contains(body, `"resource":"`+gwURL+`/mcp"`) {
		t.Errorf("metadata %s; want the resource %s/mcp", body, gwURL)
	}
}

// TestOAuth_originCheck: discovery paths get the same Origin and Host check as the MCP
// endpoint (RATIONALE.md): a rebinding page's request is refused and reaches nothing.
func TestOAuth_originCheck(t *testing.T) {
	up := newOAuthUpstream(t)
	_, gwURL := oauthGateway(t, up)
	for _, h := range []map[string]string{{"Origin": "https://evil.example"}, {"Host": "evil.example"}} {
		req, _ := http.NewRequest(http.MethodGet, gwURL+"/.well-known/oauth-protected-resource/mcp", nil)
		for k, v := range h {
			req.Header.Set(k, v)
			if k == "Host" {
				req.Host = v
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%v: %d; want 403", h, resp.StatusCode)
		}
	}
}

// TestOAuth_malformedMetadataPassesUnchanged: metadata the gateway cannot read reaches the
// client as the upstream sent it, and the fault is counted.
func TestOAuth_malformedMetadataPassesUnchanged(t *testing.T) {
	for _, doc := range []string{`{"resource":5}`, `not json`, `{"resource":"http://a/mcp","resource":"http://b/mcp"}`} {
		up := newOAuthUpstream(t)
		up.metadata = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, doc)
		}
		gw, gwURL := oauthGateway(t, up)
		before := gw.Stats.Faults(abi.FaultUpstreamBody)
		if got := getBody(t, gwURL+"/.well-known/oauth-protected-resource/mcp", nil); got != doc {
			t.Errorf("metadata %q reached the client as %q", doc, got)
		}
		if n := gw.Stats.Faults(abi.FaultUpstreamBody) - before; n != 1 {
			t.Errorf("%q: %d upstream_body faults; want 1", doc, n)
		}
	}
}

func challengeMetadataURL(t *testing.T, h http.Header) string {
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

func getBody(t *testing.T, u string, headers map[string]string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

// TestOAuth_discoveryPathRefused: a document's path that could resolve to another (dot
// segments raw or encoded, empty segments, backslashes, encoded slashes) is answered 404
// and sent nowhere: the rule and the bytes the exchange module and the Envoy filter share
// (oauth.RequestDiscovery).
func TestOAuth_discoveryPathRefused(t *testing.T) {
	up := newOAuthUpstream(t)
	_, gwURL := oauthGateway(t, up)
	addr := strings.TrimPrefix(gwURL, "http://")
	for _, p := range []string{
		"/.well-known/oauth-protected-resource/%2e%2e/%2E%2e/admin?x=1",
		"/.well-known/oauth-protected-resource/../../mcp",
		"/.well-known/oauth-authorization-server/..%2f..%2fmcp",
		"/.well-known/openid-configuration//internal",
		"/.well-known/openid-configuration/a%5Cb",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", p, addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		c.Close()
		if want := "Not Found: " + oauth.ErrDiscoveryPath.Error() + "\n"; resp.StatusCode != http.StatusNotFound || string(b) != want {
			t.Errorf("GET %s: %d %q; want 404 %q", p, resp.StatusCode, b, want)
		}
	}
	if _, hits := up.seen(); hits != 0 {
		t.Errorf("the upstream's endpoint was reached %d times", hits)
	}
}
