package extismnode

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/sjson"
)

// The tests in this file check the I/O a host does around the module's rules: size limits,
// timeouts, an unreachable upstream and an SSE answer fed chunk by chunk are all decided by
// the module (the same rules as the Go gateway's); gateway.mjs only reads, sends and writes.

const toolCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"%s","arguments":{}}}`

func callBody(tool string) string { return strings.Replace(toolCall, "%s", tool, 1) }

// sampleWith answers the sample configuration with the sjson edits path=value applied.
func sampleWith(t *testing.T, edits ...string) []byte {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join("..", "..", "abi", "testdata", "config", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		if cfg, err = sjson.SetRawBytes(cfg, edits[i], []byte(edits[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// A request body over maxBodyBytes is refused 413 by the module; the host read at most
// maxBodyBytes+1 bytes of it, and the upstream never hears of it.
func TestHost_bodyOverTheLimitIs413(t *testing.T) {
	up := &upstream{}
	gw := startGatewayWith(t, up.start(t), nil, `{"maxBodyBytes":1024}`)
	status, out := post(t, gw, "limits", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.view","arguments":{"pad":"`+strings.Repeat("x", 4096)+`"}}}`)
	wantRPCError(t, status, out, 413, -32600)
	if n := up.requests(); n != 0 {
		t.Errorf("the upstream got %d requests; want none", n)
	}
}

// An answer over maxBodyBytes passes to the client unchanged (response_too_large: fail open).
func TestHost_answerOverTheLimitPassesUnchanged(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"` + strings.Repeat("y", 8192) + `"}]}}`
	up := &upstream{answer: func(id, tool string) (string, string) {
		return "application/json", strings.Replace(big, "ID", id, 1)
	}}
	gw := startGatewayWith(t, up.start(t), nil, `{"maxBodyBytes":4096}`)
	status, out := post(t, gw, "limits", callBody("countries.list"))
	if status != 200 || out != strings.Replace(big, "ID", "7", 1) {
		t.Errorf("HTTP %d, %d bytes; want the upstream's %d bytes unchanged", status, len(out), len(big))
	}
}

// A call that outlives its tool's timeoutMs is answered TOOL_TIMEOUT when the timeout passes
// (http_timeout), not when the upstream ends.
func TestHost_timeoutAnswersToolTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release) // before the upstream's Cleanup waits for its handler
	up := &upstream{answer: func(id, tool string) (string, string) {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		return "application/json", `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[]}}`
	}}
	gw := startGateway(t, up.start(t), sampleWith(t, "limits.tools.slow", `{"timeoutMs":300}`))
	start := time.Now()
	status, out := post(t, gw, "timeouts", callBody("slow"))
	if took := time.Since(start); status != 200 || !strings.Contains(out, `"TOOL_TIMEOUT"`) || took > 5*time.Second {
		t.Errorf("HTTP %d after %v: %s; want a TOOL_TIMEOUT result soon after 300 ms", status, took, out)
	}
}

// An upstream that cannot be reached is a 502 with -32603 and UPSTREAM_UNAVAILABLE
// (http_answer with "error":"unreachable").
func TestHost_unreachableUpstreamIs502(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/mcp"
	dead.Close()
	gw := startGateway(t, url, nil)
	status, out := post(t, gw, "down", callBody("countries.list"))
	wantRPCError(t, status, out, 502, -32603)
	if !strings.Contains(out, "UPSTREAM_UNAVAILABLE") {
		t.Errorf("answer = %s; want UPSTREAM_UNAVAILABLE", out)
	}
}

// An SSE answer reaches the client as it arrives: the upstream's first event (a progress
// notification) is at the client before the upstream sends the answering event.
func TestHost_sseAnswerStreams(t *testing.T) {
	up, seen := streamingUpstream(t)
	gw := startGateway(t, up, nil)
	resp := sendStreaming(t, gw, "POST")
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	first2, _ := r.ReadString('\n')
	close(seen)
	if !strings.Contains(first+first2, "notifications/progress") {
		t.Errorf("first event = %q; want the progress notification before the answer", first+first2)
	}
	rest, _ := io.ReadAll(r)
	if !strings.Contains(string(rest), `"id":7,"result"`) {
		t.Errorf("rest = %q; want the answer", rest)
	}
}

// streamingUpstream is an upstream that answers every request with an SSE stream: a
// progress notification at once, then, once seen is closed (or after 10 s), the answer to
// id 7.
func streamingUpstream(t *testing.T) (url string, seen chan struct{}) {
	seen = make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-seen:
		case <-time.After(10 * time.Second):
		}
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n")
	}))
	t.Cleanup(s.Close)
	return s.URL + "/mcp", seen
}

// sendStreaming sends a tools/call (POST) or opens the standalone stream (GET) through gw,
// accepting SSE.
func sendStreaming(t *testing.T, gw, method string) *http.Response {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(callBody("countries.list"))
	}
	req, _ := http.NewRequest(method, gw, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", "sse")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A client that leaves while its call runs: the host tells the module (http_answer with
// "error":"cancelled"), aborts the upstream request, and goes on serving.
func TestHost_clientLeavingAbortsTheUpstream(t *testing.T) {
	arrived, aborted := make(chan struct{}), make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/list"`) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`)
			return
		}
		close(arrived)
		select {
		case <-r.Context().Done():
			close(aborted)
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(s.Close)
	gw := startGateway(t, s.URL+"/mcp", nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", gw, strings.NewReader(callBody("countries.list")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	go func() {
		<-arrived
		cancel()
	}()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request finished; want it cancelled")
	}
	select {
	case <-aborted:
	case <-time.After(5 * time.Second):
		t.Error("the upstream request was not aborted within 5 s of the client leaving")
	}
	if status, out := post(t, gw, "after", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); status != 200 {
		t.Errorf("tools/list after = HTTP %d %s", status, out)
	}
}
