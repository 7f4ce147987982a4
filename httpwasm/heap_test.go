package main_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stategate/stategate/host/demo"
)

// cannedUpstream answers tools/list with a list of the demo's tool names and any
// tools/call with a small result, echoing the request's id: an upstream that costs little,
// so the guest's work is what is measured.
func cannedUpstream() http.Handler {
	names := []string{"countries.list", "cart.add_item", "cart.checkout", "cart.pay", "cart.view", "tasks.list", "tasks.update", "sprints.list"}
	var list strings.Builder
	list.WriteString(`{"tools":[`)
	for i, n := range names {
		if i > 0 {
			list.WriteString(",")
		}
		list.WriteString(`{"name":"` + n + `","description":"the ` + n + ` tool","inputSchema":{"type":"object"}}`)
	}
	list.WriteString(`]}`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		body := string(buf[:n])
		id := "1"
		if i := strings.Index(body, `"id":`); i >= 0 {
			rest := body[i+5:]
			if j := strings.IndexAny(rest, ",}"); j > 0 {
				id = rest[:j]
			}
		}
		result := `{"content":[{"type":"text","text":"ok"}]}`
		if strings.Contains(body, `"tools/list"`) {
			result = list.String()
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "upstream-session-1")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`))
	})
}

// heapRequests are the requests the heap benchmark cycles through: a decorated list, a
// call that passes (decorated result), a call the gate denies (its state read from the
// state directory).
var heapRequests = []string{
	`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"countries.list","arguments":{}}}`,
	`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"cart.pay","arguments":{}}}`,
}

func serve(b testing.TB, h http.Handler, i int) *httptest.ResponseRecorder {
	body := strings.Replace(heapRequests[i%len(heapRequests)], "%d", strconv.Itoa(i+1), 1)
	req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", "upstream-session-1")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		b.Fatalf("request %d: %d %s", i, w.Code, w.Body.String())
	}
	return w
}

// BenchmarkGuestHeap runs b.N requests through one guest instance of the built module (in
// http-wasm-host-go, as Traefik runs it) and reports the instance's linear memory before
// (after a warm-up of 3000 requests) and after: TinyGo's heap in a VM that lives as long
// as the host keeps it. `go test ./httpwasm -run '^$' -bench GuestHeap -benchtime 1000000x`.
//
// The host pools instances in a sync.Pool, whose per-P private slot another P never takes:
// with more than one P, requests served one after another still meet new instances. One P
// keeps the one instance for the whole run.
func BenchmarkGuestHeap(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	g, err := newGuest(b, withStateDir(b, demo.Config()), b.TempDir(), cannedUpstream())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 3000 {
		w := serve(b, g.h, i)
		if i == 0 && !strings.Contains(w.Body.String(), "[Cache-Control: immutable]") {
			b.Fatalf("tools/list not decorated: %s", w.Body.String())
		}
		if i == 2 && !strings.Contains(w.Body.String(), "TOOL_NOT_AVAILABLE") {
			b.Fatalf("cart.pay not denied: %s", w.Body.String())
		}
	}
	mod := g.rt.Module("1")
	if mod == nil {
		var live []string
		for i := range 100 {
			if g.rt.Module(strconv.Itoa(i)) != nil {
				live = append(live, strconv.Itoa(i))
			}
		}
		b.Fatalf("no guest instance 1; live: %v", live)
	}
	before := mod.Memory().Size()
	b.ResetTimer()
	for i := range b.N {
		serve(b, g.h, i+3000)
	}
	b.StopTimer()
	after := mod.Memory().Size()
	if g.rt.Module("2") != nil {
		b.Logf("the host started a second guest instance (its pool was emptied by a collection): instance 1 served part of the run")
	}
	b.ReportMetric(float64(before)/(1<<20), "MiB-before")
	b.ReportMetric(float64(after)/(1<<20), "MiB-after")
	b.Logf("%d requests: guest instance 1's linear memory %d bytes before, %d after", b.N, before, after)
	if after > before {
		b.Errorf("the guest's memory grew from %d to %d bytes over %d requests", before, after, b.N)
	}
}

// BenchmarkGuestRequest is one request's cost through the built module in
// http-wasm-host-go (one instance, as BenchmarkGuestHeap), by kind: a decorated tools/list,
// a call that passes (its result decorated), a gated call the engine denies (a lease taken
// and released, the state read: file operations in the state directory).
func BenchmarkGuestRequest(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	g, err := newGuest(b, withStateDir(b, demo.Config()), b.TempDir(), cannedUpstream())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 300 {
		serve(b, g.h, i)
	}
	for k, name := range []string{"tools_list", "call_passed", "call_denied"} {
		b.Run(name, func(b *testing.B) {
			for i := range b.N {
				serve(b, g.h, i*len(heapRequests)+k)
			}
		})
	}
}
