package stdio

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/host/serve"
	"github.com/stategate/stategate/internal/testenv"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// The stdio bridge's framing (issue 38): whatever the upstream sends, the desktop client
// reads on stdout only whole JSON-RPC messages, one per line, each one the gateway checked,
// and exactly one answer to each of its requests.

const (
	allTools  = `{"tools":[{"name":"cart.add_item","description":"Add an item.","inputSchema":{"type":"object"}},{"name":"cart.checkout","description":"Check out.","inputSchema":{"type":"object"}}]}`
	listingOn = `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"listing"}}`
)

// hostileSSE is an upstream whose answers hold events of two messages: data lines that,
// joined as the SSE spec joins them, are not one JSON-RPC message. Its GET stream stays
// open until done is closed.
type hostileSSE struct{ done chan struct{} }

func (u hostileSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"hidden-a\"}}\n"+
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"hidden-b\"}}\n\n"+
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"shown-c\"}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-u.done:
		}
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	id := gjson.GetBytes(body, "id").Raw
	answer := func(result string) string { return `{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}` }
	two := "event: message\ndata: " + listingOn + "\ndata: " + answer(allTools) + "\n\n"
	sseAnswer := func(s string) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, s)
	}
	switch m := gjson.GetBytes(body, "method").Str; {
	case m == "initialize":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "up-1")
		io.WriteString(w, answer(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"hostile","version":"1"}}`))
	case id == "":
		w.WriteHeader(http.StatusAccepted)
	case m == "tools/list" && id == "2": // the unreadable event, then a readable answer
		sseAnswer(two + "event: message\ndata: " + answer(allTools) + "\n\n")
	case m == "tools/list" && id == "3": // the unreadable event only
		sseAnswer(two)
	case m == "tools/list" && id == "4": // a JSON body of two messages
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, listingOn+"\n"+answer(allTools))
	case m == "tools/list" && id == "5": // one message split over two data lines
		sseAnswer("data: {\"jsonrpc\":\"2.0\",\"id\":5,\ndata: \"result\":" + allTools + "}\n\n")
	case m == "tools/list" && id == "6": // the answer's "result" twice
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":6,"result":{"tools":[]},"result":`+allTools+`}`)
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32601,"message":"no"}}`)
	}
}

// TestStdio_hostileUpstreamOneMessagePerLine: the stdio gateway (`stategate stdio --upstream URL`) in front of an
// upstream that puts two messages in one SSE event (a notification, then an answer listing
// every tool). The client's first answer to each request is the gateway's: the decorated
// list (cart.checkout hidden in state empty, hints), or its error where no readable answer
// came; never the undecorated list; every line of stdout is one JSON-RPC message, and the
// GET stream's unreadable event reaches it neither.
func TestStdio_hostileUpstreamOneMessagePerLine(t *testing.T) {
	testenv.NeedFile(t, plugin, "run `make build`")
	upstream := hostileSSE{done: make(chan struct{})}
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	cfg := filepath.Join(t.TempDir(), "stategate.json")
	if err := os.WriteFile(cfg, exchangetest.Config("sample.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	inR, stdin := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		c := 0
		if err := runStdio(cfg, up.URL+"/mcp", inR, outW, stderr); err != nil {
			fmt.Fprintln(stderr, err)
			c = 1
		}
		outW.Close()
		code <- c
	}()
	t.Cleanup(func() { close(upstream.done); stdin.Close() }) // before up.Close: a failed check ends the run
	lines := make(chan string, 64)
	var seen syncBuffer // every line, for the checks across them
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			seen.Write([]byte(sc.Text() + "\n"))
			lines <- sc.Text()
		}
	}()
	send(t, stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	nextAnswer(t, lines, 1)
	send(t, stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	decorated := func(r gjson.Result) {
		t.Helper()
		if strings.Contains(r.Raw, "cart.checkout") || !strings.Contains(r.Raw, "[Cache-Control: no-store]") || !strings.Contains(r.Raw, "cart.add_item") {
			t.Fatalf("want the decorated list (cart.checkout hidden, hints): %s", r.Raw)
		}
	}
	gatewaysError := func(r gjson.Result) {
		t.Helper()
		if r.Get("error.code").Int() != -32603 || strings.Contains(r.Raw, "cart.") {
			t.Fatalf("want the gateway's error in place of an answer it could not read: %s", r.Raw)
		}
	}
	send(t, stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	decorated(nextAnswer(t, lines, 2))
	send(t, stdin, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	gatewaysError(nextAnswer(t, lines, 3))
	send(t, stdin, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	gatewaysError(nextAnswer(t, lines, 4))
	send(t, stdin, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	decorated(nextAnswer(t, lines, 5))
	send(t, stdin, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	gatewaysError(nextAnswer(t, lines, 6))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(seen.String(), "shown-c") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // the GET stream's readable event
	}
	stdin.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d\n%s", c, stderr)
	}
	for range lines {
	}
	out := seen.String()
	if !strings.Contains(out, "shown-c") {
		t.Errorf("the GET stream's readable notification never reached the client:\n%s", out)
	}
	if strings.Contains(out, "hidden-") || strings.Contains(out, `"data":"listing"`) {
		t.Errorf("a message of an unreadable event reached the client:\n%s", out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if m, ok := message([]byte(l)); !ok || string(m) != l {
			t.Errorf("stdout line is not one JSON-RPC message: %q", l)
		}
	}
}

// memKV is a map with compare-and-set: the native flow's state in FuzzStdioFraming.
type memKV map[string][]byte

func (m memKV) Get(keys []string) ([]kvstate.Value, error) {
	out := make([]kvstate.Value, len(keys))
	for i, k := range keys {
		v, ok := m[k]
		out[i] = kvstate.Value{B: v, Ok: ok}
	}
	return out, nil
}

func (m memKV) CAS(_, key string, prev, next kvstate.Value) (bool, error) {
	cur, ok := m[key]
	if ok != prev.Ok || ok && string(cur) != string(prev.B) {
		return false, nil
	}
	if next.Ok {
		m[key] = append([]byte(nil), next.B...)
	} else {
		delete(m, key)
	}
	return true, nil
}

type nativeEngine struct{ e *engine.Engine }

func (p nativeEngine) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	return p.e.AppendCall(nil, fn, in), nil
}

// FuzzStdioFraming: any bytes the upstream answers a tools/list with (as an event stream
// or as JSON, fed in chunks of a fuzzed size) go through the exchange core, as the gateway
// runs it (natively: the flow with the engine in process), and the gateway's answer through
// the stdio bridge. On stdout: only lines that are each one JSON-RPC message, exactly one
// answer to the request, and never a list the gateway did not check (cart.checkout is
// hidden in the workflow's first state, so any list that shows it went by unchecked).
func FuzzStdioFraming(f *testing.F) {
	ans := `{"jsonrpc":"2.0","id":1,"result":` + allTools + `}`
	for _, s := range []string{
		"event: message\ndata: " + listingOn + "\ndata: " + ans + "\n\n",
		"event: message\ndata: " + listingOn + "\ndata: " + ans + "\n\nevent: message\ndata: " + ans + "\n\n",
		listingOn + "\n" + ans,
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\ndata: \"result\":" + allTools + "}\n\n",
		"\xEF\xBB\xBFdata: " + ans + "\n\n",
		"data: " + ans + "\r\rdata: " + ans + "\r\r",
		"data: " + ans + " " + ans + "\n\n",
		"data: " + listingOn + "\n\n: comment\n\ndata:\n\ndata: " + ans,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":` + allTools + `}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"tools":` + allTools[9:len(allTools)-1] + `}}`,
		"[" + ans + "]",
	} {
		f.Add(true, s, uint8(7))
		f.Add(false, s, uint8(64))
	}
	cfg := exchangetest.Config("sample.json")
	e, err := engine.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	// One core for every input, as a gateway serves one request after another: tools/list
	// moves no workflow, so each input meets cart.checkout hidden.
	st := &kvstate.State{KV: memKV{}}
	core := exchange.New(exchange.Options{Plugin: nativeEngine{e}, State: st, Config: cfg, MaxBodyBytes: 1 << 22})
	fl := flow.New(flow.Options{Core: core, Busy: st.TakeBusy, MaxBodyBytes: 1 << 22, Origins: admission.OriginPolicy{Loopback: true}})
	f.Fuzz(func(t *testing.T, sse bool, body string, chunk uint8) {
		h := flow.Headers{{"Host", "127.0.0.1"}, {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"},
			{"MCP-Protocol-Version", "2025-06-18"}, {"Mcp-Session-Id", "s1"}}
		req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		d := fl.Request(context.Background(), flow.Request{Method: "POST", Path: "/mcp", Headers: h, Body: req})
		if d.Open == nil {
			t.Fatalf("tools/list not forwarded: %q", d.Do)
		}
		ct := "application/json"
		if sse {
			ct = "text/event-stream"
		}
		up := flow.Headers{{"Content-Type", ct}}
		n := max(int(chunk), 1)
		var status int
		var respCT string
		var client bytes.Buffer
		for i := 0; ; i += n {
			end := min(i+n, len(body))
			out := d.Open.Answer(200, up, []byte(body[min(i, len(body)):end]), end < len(body))
			if out.Start {
				status, respCT = out.Status, out.Headers.Get("Content-Type")
			}
			client.Write(out.Body)
			if out.End {
				break
			}
			if i > len(body) {
				t.Fatal("the answer never ended")
			}
		}
		var stdout bytes.Buffer
		b := &bridge{out: &stdout, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		_, ok := b.relay(status, respCT, &client, gjson.Parse("1"), true, false)
		if !ok {
			b.write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"unread"}}`)) // as post does
		}
		answered := 0
		for _, l := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
			m, ok := message([]byte(l))
			if !ok || string(m) != l {
				t.Fatalf("stdout line is not one compact JSON-RPC message: %q\nstdout:\n%s", l, stdout.String())
			}
			if answers(m, gjson.Parse("1")) {
				answered++
				if listsHidden(m) {
					t.Fatalf("a list the gateway did not check reached the client: %q", l)
				}
			}
		}
		if answered != 1 {
			t.Fatalf("%d answers to the request on stdout, want one:\n%s", answered, stdout.String())
		}
	})
}

// listsHidden reports whether an answer lists cart.checkout (hidden in the workflow's
// initial state) where a client reads its tools: result.tools[].name. Text elsewhere in the
// answer (under another member, as the fuzzer found) lists nothing.
func listsHidden(m []byte) bool {
	hidden := false
	gjson.GetBytes(m, "result.tools").ForEach(func(_, tool gjson.Result) bool {
		hidden = tool.Get("name").Str == "cart.checkout"
		return !hidden
	})
	return hidden
}

const plugin = "../../build/stategate.wasm"

// runStdio runs what `stategate stdio --config cfg --plugin plugin --upstream url` runs.
func runStdio(cfg, url string, stdin io.Reader, stdout, stderr io.Writer) error {
	logger := serve.NewLogger("text", stderr)
	up, err := serve.ResolveUpstream(url, "auto", nil, 2, -1, logger)
	if err != nil {
		return err
	}
	return Run(context.Background(), Options{ConfigPath: cfg, Upstream: up, Logger: logger,
		Serve: serve.Options{Name: "stdio-test", Store: "memory", Plugin: plugin},
		Ops:   serve.OpsOptions{Admin: "off", LogFormat: "text", Drain: 5 * time.Second}}, stdin, stdout, stderr)
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

func send(t *testing.T, w io.Writer, msg string) {
	t.Helper()
	if _, err := io.WriteString(w, msg+"\n"); err != nil {
		t.Fatal(err)
	}
}

// nextAnswer returns the next line on stdout that answers id (every line must be JSON-RPC).
func nextAnswer(t *testing.T, lines <-chan string, id int) gjson.Result {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stdout ended before the answer to %d", id)
			}
			m := gjson.Parse(l)
			if !gjson.Valid(l) || m.Get("jsonrpc").Str != "2.0" {
				t.Fatalf("stdout carries something other than JSON-RPC: %q", l)
			}
			if m.Get("id").Int() == int64(id) && !m.Get("method").Exists() {
				return m
			}
		case <-deadline:
			t.Fatalf("no answer to %d", id)
		}
	}
}
