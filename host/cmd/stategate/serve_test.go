package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stategate/stategate/host/demo"

	dto "github.com/prometheus/client_model/go"
)

// A running `stategate serve` with its admin listener, in this process, in front of the
// demo MCP server (the official Go SDK), on the built plugin and a bolt file.
type served struct {
	mcpURL, adminURL, token, cfgPath string
	stop                             context.CancelFunc
	done                             chan error
	stderr                           *syncBuffer
	upstream                         *httptest.Server
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	adminLine   = regexp.MustCompile(`^stategate: admin (http://\S+) `)
	servingLine = regexp.MustCompile(`^stategate: serving (http://\S+) `)
)

// startServe runs serve with a token file and --admin on loopback; it returns once both
// listeners are up and the gateway is ready.
func startServe(t *testing.T, up demo.Options, extra ...string) *served {
	t.Helper()
	return startServeConfigIn(t, demo.Handler(up), demo.Config(), extra...)
}

// startServeConfig is startServe with the configuration cfg.
func startServeConfig(t *testing.T, up demo.Options, cfg []byte, extra ...string) *served {
	t.Helper()
	return startServeConfigIn(t, demo.Handler(up), cfg, extra...)
}

// startServeIn is startServe in front of the MCP server h.
func startServeIn(t *testing.T, h http.Handler, extra ...string) *served {
	t.Helper()
	return startServeConfigIn(t, h, demo.Config(), extra...)
}

// startServeConfigIn is startServe in front of the MCP server h with the configuration cfg.
func startServeConfigIn(t *testing.T, h http.Handler, cfg []byte, extra ...string) *served {
	t.Helper()
	needPlugin(t)
	upstream := httptest.NewServer(h)
	t.Cleanup(upstream.Close)
	dir := t.TempDir()
	s := &served{token: "tok-" + t.Name(), cfgPath: filepath.Join(dir, "config.json"), done: make(chan error, 1), stderr: &syncBuffer{}, upstream: upstream}
	if err := os.WriteFile(s.cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(s.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config", s.cfgPath, "--upstream", upstream.URL + "/mcp", "--listen", "127.0.0.1:0",
		"--store", "bolt:" + filepath.Join(dir, "state.db"), "--plugin", plugin, "--admin", "127.0.0.1:0",
		"--admin-token-file", tokenFile, "--probe-interval", "200ms", "--drain-timeout", "10s"}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	pr, pw := io.Pipe()
	go func() {
		s.done <- cmdServe(ctx, args, pw, s.stderr)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		if m := adminLine.FindStringSubmatch(lines.Text()); m != nil {
			s.adminURL = m[1]
		}
		if m := servingLine.FindStringSubmatch(lines.Text()); m != nil {
			s.mcpURL = m[1] + "/mcp"
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if s.mcpURL == "" || s.adminURL == "" {
		cancel()
		t.Fatalf("serve did not start: %v\n%s", <-s.done, s.stderr.String())
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	})
	s.waitState(t, "/readyz", "ready")
	return s
}

// waitState polls a probe until it answers state (probes run every 200 ms).
func (s *served) waitState(t *testing.T, probe, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(s.adminURL + probe)
		if err == nil {
			var body map[string]string
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if body["state"] == state {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered state %s (last err %v)\n%s", probe, state, err, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// admin sends an authenticated admin request.
func (s *served) admin(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, s.adminURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// metrics scrapes /metrics and parses it with the official exposition-format parser.
func (s *served) metrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	status, body := s.admin(t, "GET", "/metrics", "")
	if status != 200 {
		t.Fatalf("metrics: %d %s", status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	return fams
}

// value returns the value of the sample of fam whose labels include labels ("k=v").
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// mcpClient connects the official SDK client to the gateway.
func mcpClient(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "ops-test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

func mustCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := callTool(cs, name, args)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// sseReader reads events off /admin/events.
type sseReader struct {
	events chan map[string]any
	cancel context.CancelFunc
}

func (s *served) subscribeSSE(t *testing.T, query string) *sseReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", s.adminURL+"/admin/events"+query, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		t.Fatalf("SSE subscribe: %v %v", err, resp)
	}
	r := &sseReader{events: make(chan map[string]any, 1000), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var e map[string]any
				if json.Unmarshal([]byte(d), &e) == nil {
					r.events <- e
				}
			}
		}
		close(r.events)
	}()
	return r
}

// next returns the next event, failing after a few seconds.
func next(t *testing.T, events <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatal("event stream ended")
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return nil
}

func describe(e map[string]any) string {
	s := fmt.Sprint(e["type"], " ", e["tool"])
	if e["old_state"] != nil || e["new_state"] != nil {
		s += fmt.Sprint(" ", e["old_state"], "->", e["new_state"])
	}
	return s
}

func textsOf(content []mcp.Content) []string {
	var out []string
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}
