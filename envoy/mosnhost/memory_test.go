//go:build cgo

package mosnhost

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// upstreamFunc answers in process, so a million requests measure the VM, not loopback.
type upstreamFunc func(*http.Request) (*http.Response, error)

func (f upstreamFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// demoUpstream answers tools/list with the sample configuration's tools and every
// tools/call with a small result.
var demoUpstream = upstreamFunc(func(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	id := gjson.GetBytes(body, "id").Raw
	var out string
	switch gjson.GetBytes(body, "method").String() {
	case "tools/list":
		out = `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[` +
			`{"name":"cart.add_item","inputSchema":{"type":"object"}},{"name":"cart.checkout","inputSchema":{"type":"object"}},` +
			`{"name":"cart.pay","inputSchema":{"type":"object"}},{"name":"catalog.search","inputSchema":{"type":"object"}}]}}`
	default:
		out = `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"ok"}]}}`
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		ContentLength: int64(len(out)), Body: io.NopCloser(strings.NewReader(out))}, nil
})

// mix is the traffic of the long-lived VM: a list, a call the gate denies (answered by the
// filter), a call admitted (upstream, transition, decorate_result), over 16 sessions, so
// the shared-data keys stay bounded and the filter's own state is steady.
func mix(p *Proxy, i int) Response {
	session := "s-" + strconv.Itoa(i%16)
	h := [][2]string{{"content-type", "application/json"}, {"accept", "application/json, text/event-stream"},
		{"mcp-protocol-version", "2025-06-18"}, {"mcp-session-id", session}}
	var body string
	switch i % 3 {
	case 0:
		body = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/list"}`
	case 1:
		body = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"cart.pay","arguments":{}}}`
	default:
		body = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"catalog.search","arguments":{"q":"book"}}}`
	}
	return p.Exchange("POST", "/mcp", "127.0.0.1:8080", h, []byte(body))
}

func longLived(t testing.TB, path, how string) *Proxy {
	cfg, err := os.ReadFile(filepath.Join("..", "..", "abi", "testdata", "config", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Module: compile(t, path, how), PluginConfig: cfg, VMConfig: []byte(holdHeaders),
		Upstream: "http://127.0.0.1:3001", Transport: demoUpstream})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run drives n requests of the mix and returns the guest's memory before and after.
func run(t testing.TB, p *Proxy, n int) (before, after int) {
	for i := range 300 { // warm: every kind of request, every session's keys
		if r := mix(p, i); r.Status != 200 {
			t.Fatalf("warm-up request %d: %d %s", i, r.Status, r.Body)
		}
	}
	before = p.MemoryBytes()
	for i := range n {
		r := mix(p, i)
		if r.Status != 200 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
		if i%3 == 1 && !bytes.Contains(r.Body, []byte("TOOL_NOT_AVAILABLE")) {
			t.Fatalf("request %d: cart.pay not denied: %s", i, r.Body)
		}
	}
	return before, p.MemoryBytes()
}

// TestLongLivedVM_memoryIsFlat: one VM of the TinyGo filter, as an Envoy worker keeps it,
// takes 30,000 requests; its linear memory must not grow after the warm-up.
// BenchmarkLongLivedVM runs the same mix for as many requests as -benchtime says
// (`-benchtime=1000000x` for the figures in docs/envoy.md).
func TestLongLivedVM_memoryIsFlat(t *testing.T) {
	n := 30000
	if testing.Short() {
		n = 3000
	}
	p := longLived(t, modules[0].path, modules[0].make)
	before, after := run(t, p, n)
	t.Logf("guest memory: %d bytes before, %d after %d requests; denied %d", before, after, n, p.Metric("stategate.calls_denied"))
	if after > before {
		t.Errorf("guest memory grew from %s to %s over %d requests", mib(before), mib(after), n)
	}
}

func BenchmarkLongLivedVM(b *testing.B) {
	p := longLived(b, modules[0].path, modules[0].make)
	b.ResetTimer()
	before, after := run(b, p, b.N)
	b.ReportMetric(float64(before)/(1<<20), "MiB-before")
	b.ReportMetric(float64(after)/(1<<20), "MiB-after")
	b.Logf("%d requests: guest memory %s before, %s after", b.N, mib(before), mib(after))
	if after > before {
		b.Errorf("guest memory grew from %s to %s over %d requests", mib(before), mib(after), b.N)
	}
}

func mib(n int) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
