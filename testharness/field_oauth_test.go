package testharness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/testenv"
)

// fieldOAuthServer starts field/oauth-server.mjs (a resource server on the official SDK's
// auth helpers accepting only token) and returns its MCP endpoint.
func fieldOAuthServer(ctx context.Context, t *testing.T, token string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", "oauth-server.mjs", "--port", "0")
	cmd.Dir = fieldDir
	cmd.Env = append(os.Environ(), "FIELD_OAUTH_TOKEN="+token)
	url, _ := startWatched(t, cmd, regexp.MustCompile(`^listening (http://\S+)$`), true)
	return url
}

// TestField_oauth: the official TypeScript client's OAuth discovery, pointed at the
// gateway, finds the protected-resource metadata with the gateway's URL as its resource
// (from the 401's resource_metadata, the well-known paths and the legacy authorization
// server discovery at the gateway's origin), and with the token its calls reach the server
// with the Authorization header intact (field/oauth.mjs). Once with the default public URL
// (the listen address), once with --public-url naming the gateway as localhost; the token
// never appears in the gateway's log.
func TestField_oauth(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := make([]byte, 12)
	rand.Read(b)
	token := "field-" + hex.EncodeToString(b)
	upstream := fieldOAuthServer(ctx, t, token)
	const config = `{"version": 1, "stateSync": {"defaults": {"cacheControl": "no-store"}}}`

	t.Run("default public url", func(t *testing.T) {
		gw := fieldServe(ctx, t, bin, config, upstream, "--log-format", "json")
		t.Logf("%s", fieldNode(ctx, t, "oauth.mjs", "GATEWAY_URL="+gw.URL, "FIELD_OAUTH_TOKEN="+token))
		if strings.Contains(gw.Log(), token) {
			t.Errorf("the token appears in the gateway's log:\n%s", gw.Log())
		}
	})
	t.Run("--public-url", func(t *testing.T) {
		port := strconv.Itoa(testenv.FreePort(t))
		gw := fieldServe(ctx, t, bin, config, upstream, "--listen", "127.0.0.1:"+port, "--public-url", "http://localhost:"+port)
		url := "http://localhost:" + port + "/mcp"
		if gw.URL != "http://127.0.0.1:"+port+"/mcp" {
			t.Fatalf("gateway at %s; want port %s", gw.URL, port)
		}
		t.Logf("%s", fieldNode(ctx, t, "oauth.mjs", "GATEWAY_URL="+url, "FIELD_OAUTH_TOKEN="+token))
	})
}
