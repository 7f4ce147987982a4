package extismnode

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/testenv"
)

// TestOfficialClient_oauth is testharness's TestField_oauth through the Node host: the
// official TypeScript client's OAuth discovery (field/oauth.mjs: its 401 flow with an
// authProvider, discoverOAuthProtectedResourceMetadata, the legacy authorization-server
// discovery at the gateway's origin, then calls with the token) in front of a resource
// server on the official SDK's auth helpers (field/oauth-server.mjs). The module routes the
// well-known documents to the server's and rewrites them and the 401's challenge to name the
// gateway; the SDK refuses metadata whose resource is not the URL it used. Once with the
// default public URL (the listen address), once with --public-url naming it localhost.
func TestOfficialClient_oauth(t *testing.T) {
	needField(t)
	b := make([]byte, 12)
	rand.Read(b)
	token := "field-" + hex.EncodeToString(b)
	cmd := exec.Command("node", "oauth-server.mjs", "--port", "0")
	cmd.Env = append(os.Environ(), "FIELD_OAUTH_TOKEN="+token)
	up := startServer(t, cmd, regexp.MustCompile(`^listening (http://\S+)$`))
	const config = `{"version": 1, "stateSync": {"defaults": {"cacheControl": "no-store"}}}`

	t.Run("default public url", func(t *testing.T) {
		port := strconv.Itoa(testenv.FreePort(t))
		gw := startGateway(t, up, []byte(config), "--listen", "127.0.0.1:"+port)
		if gw != "http://127.0.0.1:"+port+"/mcp" {
			t.Fatalf("gateway at %s; want port %s", gw, port)
		}
		runScript(t, "oauth.mjs", gw, "FIELD_OAUTH_TOKEN="+token)
	})
	t.Run("--public-url", func(t *testing.T) {
		port := strconv.Itoa(testenv.FreePort(t))
		startGateway(t, up, []byte(config), "--listen", "127.0.0.1:"+port, "--public-url", "http://localhost:"+port)
		runScript(t, "oauth.mjs", "http://localhost:"+port+"/mcp", "FIELD_OAUTH_TOKEN="+token)
	})
}

// TestHost_originPathOutsideTheDocumentIsRefused: a host of the page's exports (loadExchange
// and serve, with no upstream exchange option, so the module may send a discovery request's
// suffix as it came, origin true) never resolves dot segments or backslashes into another
// path at the upstream's origin: the upstream only ever sees its MCP endpoint or a
// well-known path without them, and no client gets the answer to another.
func TestHost_originPathOutsideTheDocumentIsRefused(t *testing.T) {
	needNode(t)
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		io.WriteString(w, "upstream path "+r.URL.Path)
	}))
	t.Cleanup(up.Close)
	// outside reports whether a path the upstream got (decoded) is neither its endpoint nor
	// a well-known path without dot segments or backslashes.
	outside := func(p string) bool {
		return p != "/mcp" && !strings.HasPrefix(p, "/.well-known/") || strings.Contains(p, "/..") || strings.Contains(p, `\`)
	}
	page, err := filepath.Abs("gateway.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// argv[1] is not the page, so its main() does not run.
	const script = `const [page, manifest, upstream, exchange] = process.argv.slice(2);
const { loadExchange, serve } = await import(page);
await serve(await loadExchange(manifest, { exchange: JSON.parse(exchange) }), upstream, '127.0.0.1:0');`
	// Without a public URL every document passes through (rewrite false); with one, the
	// protected-resource metadata is read by the module (rewrite true).
	var gws []string
	for _, exchange := range []string{`{"loopback":true}`, `{"loopback":true,"publicUrl":"http://gateway.example"}`} {
		gw, _ := startNode(t, exec.Command("node", "--input-type=module", "-e", script, "host", page, testManifest(t, nil, ""), up.URL+"/mcp", exchange))
		gws = append(gws, gw)
	}
	for _, r := range []struct{ gw, path string }{
		{gws[0], "/.well-known/oauth-protected-resource/%2e%2e/%2e%2e/admin?x=1"},
		{gws[0], "/.well-known/openid-configuration/../../admin"},
		{gws[0], `/.well-known/oauth-authorization-server/..\..\admin`},
		{gws[0], "/.well-known/oauth-authorization-server//admin"},
		{gws[1], "/.well-known/oauth-protected-resource/%2e%2e/%2e%2e/admin?x=1"},
		{gws[1], "/.well-known/oauth-protected-resource/../../admin"},
	} {
		p := r.path
		c := rawRequest(t, r.gw, "GET", p, "")
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		b, _ := io.ReadAll(resp.Body)
		c.Close()
		t.Logf("GET %s: HTTP %d %q", p, resp.StatusCode, b)
		if got, ok := strings.CutPrefix(string(b), "upstream path "); ok && outside(got) {
			t.Errorf("GET %s: HTTP %d %q; the client got the answer to another path", p, resp.StatusCode, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range seen {
		if outside(p) {
			t.Errorf("the upstream was asked for %s", p)
		}
	}
}

// TestHost_wildcardListenHasNoDefaultPublicURL: --listen on every interface (0.0.0.0, or an
// empty host) names no address to give clients, so the host runs without a public URL and
// says so: challenges pass unchanged rather than naming http://0.0.0.0:port.
func TestHost_wildcardListenHasNoDefaultPublicURL(t *testing.T) {
	up := bigResourceServer(t, 1)
	for _, host := range []string{"0.0.0.0", ""} {
		t.Run(host, func(t *testing.T) {
			needNode(t)
			port := strconv.Itoa(testenv.FreePort(t))
			args := []string{"gateway.mjs", "--upstream", up, "--listen", host + ":" + port, "--manifest", testManifest(t, nil, "")}
			_, log := startNode(t, exec.Command("node", args...))
			req, _ := http.NewRequest("POST", "http://127.0.0.1:"+port+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			req.Header.Set("Authorization", "Bearer wrong")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if c, want := resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+strings.TrimSuffix(up, "/mcp")+`/.well-known/oauth-protected-resource/mcp"`; resp.StatusCode != http.StatusUnauthorized || !strings.Contains(c, want) {
				t.Errorf("HTTP %d, challenge %q; want 401 naming the upstream's metadata unchanged: %s", resp.StatusCode, c, want)
			}
			if !strings.Contains(log(), "stategate: no public URL") {
				t.Errorf("the host did not say it runs without a public URL:\n%s", log())
			}
		})
	}
}
