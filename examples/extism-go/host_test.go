package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/tidwall/sjson"
)

// slowUpstream answers every tools/call with a text result after delay.
func slowUpstream(t *testing.T, delay time.Duration) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(delay)
		id := strings.SplitN(strings.SplitN(string(body)+`"id":0,`, `"id":`, 2)[1], ",", 2)[0]
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	}))
	t.Cleanup(up.Close)
	return up
}

func startHost(t *testing.T, cfg []byte, upstream string) string {
	h, err := New(context.Background(), Options{Module: loadModule(t), Config: cfg, Upstream: upstream + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func callTool(t *testing.T, url, tool string) (int, string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Mcp-Session-Id", "s1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHost_movingCallsWaitForTheLease: two moving calls on one workflow at once; the
// second finds the first's lease, the module answers "wait", and it runs after the first.
func TestHost_movingCallsWaitForTheLease(t *testing.T) {
	url := startHost(t, exchangetest.Config("sample.json"), slowUpstream(t, 300*time.Millisecond).URL)
	var wg sync.WaitGroup
	got := make([]string, 2)
	start := time.Now()
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				time.Sleep(50 * time.Millisecond)
			}
			_, got[i] = callTool(t, url, "cart.add_item")
		}()
	}
	wg.Wait()
	for i, b := range got {
		if !strings.Contains(b, `"ok"`) {
			t.Errorf("call %d: %s", i, b)
		}
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Errorf("both calls done in %v: the second did not wait for the first's lease", d)
	}
}

// TestHost_timeoutAnswersToolTimeout: an upstream slower than the tool's timeout; the
// client gets the engine's TOOL_TIMEOUT result from http_timeout.
func TestHost_timeoutAnswersToolTimeout(t *testing.T) {
	cfg, _ := sjson.SetBytes(exchangetest.Config("sample.json"), "limits.timeoutMs", 100)
	url := startHost(t, cfg, slowUpstream(t, 600*time.Millisecond).URL)
	start := time.Now()
	status, body := callTool(t, url, "tasks.update")
	if status != 200 || !strings.Contains(body, "TOOL_TIMEOUT") {
		t.Errorf("got %d %s, want TOOL_TIMEOUT", status, body)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("answered after %v: the timeout did not cut the wait", d)
	}
}
