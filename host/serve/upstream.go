package serve

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/gateway/upstream"
)

// Upstream is the MCP server a gateway fronts: a Streamable HTTP URL, a legacy
// HTTP+SSE URL, or a stdio command (host/gateway/upstream carries the last two).
type Upstream struct {
	URL       *url.URL
	Kind      string   // "http", "sse" or "stdio"
	Command   []string // stdio: the command and its arguments
	Transport http.RoundTripper
	Sessions  *upstream.Sessions // sse and stdio: the connections, closed at shutdown
}

// String names the upstream for logs.
func (u Upstream) String() string {
	switch u.Kind {
	case "stdio":
		return "stdio: " + strings.Join(u.Command, " ")
	case "sse":
		return u.URL.Redacted() + " (HTTP+SSE)"
	}
	return u.URL.Redacted()
}

// mcpTransport is how a client of the upstream reaches it (the tools probe); nil for a
// command (a child is started only for a client).
func (u Upstream) mcpTransport() mcp.Transport {
	switch u.Kind {
	case "sse":
		return &mcp.SSEClientTransport{Endpoint: u.URL.String()}
	case "http":
		return &mcp.StreamableClientTransport{Endpoint: u.URL.String()}
	}
	return nil
}

// stdioPlaceholder is the URL the gateway is given for a command: its transport ignores it.
var stdioPlaceholder = &url.URL{Scheme: "http", Host: "stdio.invalid", Path: "/mcp"}

// ResolveUpstream reads --upstream, --upstream-transport and a command after "--".
// transport is auto, streamable or sse; auto takes a URL whose path ends in /sse for the
// legacy transport (server-everything's, and most hosted legacy servers').
func ResolveUpstream(raw, transport string, command []string, maxSessions int, idle time.Duration, logger *slog.Logger) (Upstream, error) {
	switch transport {
	case "", "auto", "streamable", "sse":
	default:
		return Upstream{}, fmt.Errorf("--upstream-transport %q: want auto, streamable or sse", transport)
	}
	if len(command) > 0 {
		if raw != "" {
			return Upstream{}, fmt.Errorf("--upstream and a command after -- both name the server: give one")
		}
		path, err := exec.LookPath(command[0])
		if err != nil {
			return Upstream{}, fmt.Errorf("command[%s]: %w", command[0], err)
		}
		s := upstream.New(upstream.Options{Kind: "stdio", MaxSessions: maxSessions, IdleTimeout: idle, Logger: logger,
			Dial: upstream.Command{Path: path, Args: command[1:]}.Dial})
		return Upstream{URL: stdioPlaceholder, Kind: "stdio", Command: command, Transport: s, Sessions: s}, nil
	}
	if raw == "" {
		return Upstream{}, fmt.Errorf("--upstream URL or a command after -- is required: the MCP server to front, e.g. --upstream http://127.0.0.1:3001/mcp, or -- npx -y @modelcontextprotocol/server-memory (`stategate demo --upstream-only` runs one)")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Upstream{}, fmt.Errorf("--upstream %q is not an http(s) URL", raw)
	}
	if transport == "sse" || ((transport == "" || transport == "auto") && strings.HasSuffix(u.Path, "/sse")) {
		// Each upstream SSE session carries the credentials of the requests that use it:
		// sessionless requests share one only with the same credentials, and a session
		// whose requests come with others (a refreshed token) moves to a new one.
		s := upstream.New(upstream.Options{Kind: "sse", MaxSessions: maxSessions, IdleTimeout: idle, Logger: logger,
			Dial: upstream.LegacySSE{Endpoint: u.String()}.Dial, BindCredentials: true})
		return Upstream{URL: u, Kind: "sse", Transport: s, Sessions: s}, nil
	}
	return Upstream{URL: u, Kind: "http"}, nil
}
