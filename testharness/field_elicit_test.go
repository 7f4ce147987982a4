package testharness

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fieldElicitConfig asks a person before server-everything's echo runs.
const fieldElicitConfig = `{"version": 1, "approvals": [{"match": "echo", "by": "user", "message": "Echo this back?"}]}`

// callCounter is a reverse proxy in front of an upstream that counts the tools/call
// requests it passes, by tool, and keeps whether any body held sub.
type callCounter struct {
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	calls map[string]int
	seen  []string
}

func (c *callCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.mu.Lock()
	c.seen = append(c.seen, string(body))
	if bytes.Contains(body, []byte(`"tools/call"`)) {
		for _, tool := range []string{"echo", "get-sum"} {
			if bytes.Contains(body, []byte(`"name":"`+tool+`"`)) {
				c.calls[tool]++
			}
		}
	}
	c.mu.Unlock()
	c.proxy.ServeHTTP(w, r)
}

func (c *callCounter) count(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[tool]
}

func (c *callCounter) saw(sub string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.seen {
		if strings.Contains(b, sub) {
			return true
		}
	}
	return false
}

// TestField_elicitation: human approval for a 2025-11-25 client (issue 41, item 3). The
// official TypeScript client with an elicitation handler (field/elicit.mjs), through the
// real `stategate serve` with an approvals entry for echo, in front of server-everything
// (Streamable HTTP, its own sessions) and of the stateless official-SDK server (the
// gateway's own sessions): the gateway asks on the call's stream; accept runs echo (the
// server saw it once), decline, cancel and an accept without the yes are refused and the
// server never sees those calls, nor the gateway's question or the client's answers; a
// client without the elicitation capability is refused at once.
func TestField_elicitation(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, up := range []struct{ name, url, args string }{
		{"everything", fieldEverything(ctx, t, "streamableHttp"), `{"message":"hi"}`},
		{"stateless", fieldStateless(ctx, t), `{"text":"hi"}`},
	} {
		t.Run(up.name, func(t *testing.T) {
			target, _ := url.Parse(up.url)
			counter := &callCounter{calls: map[string]int{}}
			counter.proxy = &httputil.ReverseProxy{
				Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host}) },
				FlushInterval: -1,
			}
			front := httptest.NewServer(counter)
			t.Cleanup(front.Close)
			gw := fieldServe(ctx, t, bin, fieldElicitConfig, front.URL+target.Path)
			out := fieldNode(ctx, t, "elicit.mjs", "GATEWAY_URL="+gw.URL, "ARGS="+up.args)
			t.Logf("%s", out)
			if n := counter.count("echo"); n != 1 {
				t.Errorf("the server saw echo %d times, want 1 (the accepted call only)", n)
			}
			if counter.saw("dev.stategate/approval") {
				t.Error("the server saw the gateway's question or an answer to it")
			}
		})
	}
}
