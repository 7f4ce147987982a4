package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/gateway/upstream"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// TestExchangeSuite_stdio runs the exchange suite with the upstream behind the stdio
// transport (host/gateway/upstream): newline-delimited JSON-RPC framed by the official Go
// SDK, to a server that answers each step as the case says. The decisions and the bytes
// out must be the ones recorded over HTTP. Cases whose upstream answers something stdio
// cannot carry (an HTTP status, SSE, a session header, an exact upstream session) or that
// check the upstream's HTTP session are left out, each with the reason.
func TestExchangeSuite_stdio(t *testing.T) {
	rt := pluginRuntime(t)
	exchangetest.RunHolding(t, func(t *testing.T, cfg []byte, o exchangetest.HostOptions) exchangetest.Host {
		if why := stdioUnfit(t.Name()); why != "" {
			t.Skip("not over stdio: " + why)
		}
		h := &stdioHost{}
		ctx := context.Background()
		pool, err := wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close(ctx) })
		sessions := upstream.New(upstream.Options{Kind: "stdio", Dial: h.dial, AdoptUnknown: true})
		t.Cleanup(func() { sessions.Close() })
		u, _ := url.Parse("http://stdio.invalid/mcp")
		gw, err := gateway.New(gateway.Options{Upstream: u, Transport: sessions, Plugin: pool, Config: cfg,
			Store: store.NewMemory(store.Options{}), Origins: admission.OriginPolicy{Loopback: true}, PublicURL: o.PublicURL})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		h.url = srv.URL + "/mcp"
		return h
	})
}

// stdioUnfit says why a case (by test name) cannot run over stdio, "" when it can.
func stdioUnfit(name string) string {
	c := name[strings.LastIndex(name, "/")+1:]
	for _, k := range exchangetest.Cases() {
		if k.Name != c {
			continue
		}
		for _, s := range k.Steps {
			if strings.HasPrefix(strings.TrimSpace(s.Body), "[") {
				return "a batch goes to a stdio server one message at a time (the SDK's Connection writes one message)"
			}
			if s.Method != "" && s.Method != http.MethodPost {
				return "a " + s.Method + " request"
			}
			if u := s.Upstream; u != nil {
				if u.Status != http.StatusOK {
					return "the upstream answers HTTP status " + http.StatusText(u.Status)
				}
				if !strings.HasPrefix(strings.ToLower(u.ContentType), "application/json") {
					return "the upstream answers " + u.ContentType
				}
				if !strings.Contains(u.Body, "{{id}}") && strings.Contains(u.Body, `"id"`) {
					return "the upstream answers another id: over stdio an answer belongs to its request by its id alone"
				}
				if u.Session != "" {
					return "the upstream issues an HTTP session"
				}
				if repeatsTopLevel(strings.ReplaceAll(u.Body, "{{id}}", "1")) {
					return "the upstream's answer repeats a top-level member: the SDK's framing decodes each message, so the gateway gets it once"
				}
			}
			if s.Want.Session != "" || (s.Want.UpstreamSession != "" && s.Want.UpstreamSession != "none") {
				return "checks HTTP sessions"
			}
		}
	}
	return ""
}

// repeatsTopLevel reports whether body, a JSON object, names a top-level member twice.
func repeatsTopLevel(body string) bool {
	d := json.NewDecoder(strings.NewReader(body))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return false
		}
		if key, _ := k.(string); seen[key] {
			return true
		} else {
			seen[key] = true
		}
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return false
		}
	}
	return false
}

// stdioHost answers the gateway's upstream requests over a newline-delimited stream.
type stdioHost struct {
	url      string
	mu       sync.Mutex
	step     exchangetest.Step
	called   bool
	received []byte
}

// dial connects the gateway's upstream transport to a server goroutine through pipes,
// framed by the SDK's IOTransport, as a child's stdin and stdout would be.
func (h *stdioHost) dial(ctx context.Context, _ http.Header) (mcp.Connection, error) {
	toServer, fromGateway := io.Pipe()
	toGateway, fromServer := io.Pipe()
	go h.serve(toServer, fromServer)
	return (&mcp.IOTransport{Reader: toGateway, Writer: fromGateway}).Connect(ctx)
}

func (h *stdioHost) serve(in io.ReadCloser, out io.WriteCloser) {
	defer out.Close()
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		line = bytes.TrimSpace(line)
		h.mu.Lock()
		s := h.step
		h.called, h.received = true, line
		h.mu.Unlock()
		var probe struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(line, &probe)
		if probe.ID == nil || probe.Method == "" {
			continue // a notification or a response: nothing to answer
		}
		answer := `{"jsonrpc":"2.0","id":` + string(probe.ID) + `,"error":{"code":-32603,"message":"the upstream was not to be called"}}`
		if s.Upstream != nil {
			answer = exchangetest.UpstreamAnswer(s, line)
		}
		var b bytes.Buffer
		if json.Compact(&b, []byte(answer)) != nil {
			b.Reset()
			b.WriteString(answer)
		}
		b.WriteByte('\n')
		if _, err := out.Write(b.Bytes()); err != nil {
			return
		}
	}
}

func (h *stdioHost) Do(t *testing.T, s exchangetest.Step) exchangetest.Got {
	h.mu.Lock()
	h.step, h.called, h.received = s, false, nil
	h.mu.Unlock()
	req, _ := http.NewRequest(http.MethodPost, h.url, strings.NewReader(s.Body))
	for k, vs := range s.Headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	return exchangetest.Got{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(body),
		UpstreamCalled: h.called, UpstreamBody: string(h.received)}
}
