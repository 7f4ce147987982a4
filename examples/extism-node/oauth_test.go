package extismnode

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
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
		port := freePort(t)
		gw := startGateway(t, up, []byte(config), "--listen", "127.0.0.1:"+port)
		if gw != "http://127.0.0.1:"+port+"/mcp" {
			t.Fatalf("gateway at %s; want port %s", gw, port)
		}
		runScript(t, "oauth.mjs", gw, "FIELD_OAUTH_TOKEN="+token)
	})
	t.Run("--public-url", func(t *testing.T) {
		port := freePort(t)
		startGateway(t, up, []byte(config), "--listen", "127.0.0.1:"+port, "--public-url", "http://localhost:"+port)
		runScript(t, "oauth.mjs", "http://localhost:"+port+"/mcp", "FIELD_OAUTH_TOKEN="+token)
	})
}

// freePort is a loopback port free a moment ago.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
