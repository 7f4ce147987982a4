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

// TestHost_notificationsReachStandingStreams: a JSON-only client's call that changes the
// visible tools gets its list_changed on the session's standing stream: the upstream's GET
// stream (the module passes it event by event, the host merges the event in) and the
// gateway's own stream of a session it issued.
func TestHost_notificationsReachStandingStreams(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			io.WriteString(w, ": open\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"initialize"`) {
			io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
			return
		}
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	}))
	t.Cleanup(up.Close)
	url := startHost(t, exchangetest.Config("sample.json"), up.URL)
	post := func(session, body string) *http.Response {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp
	}
	minted := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`).Header.Get("Mcp-Session-Id")
	if !strings.HasPrefix(minted, exchangetest.SessionPrefix) {
		t.Fatalf("initialize got session %q, want one the gateway issued", minted)
	}
	for _, session := range []string{"u1", minted} {
		t.Run(session[:2], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", session)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET stream: %d", resp.StatusCode)
			}
			time.Sleep(50 * time.Millisecond) // the host registers the stream
			post(session, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.add_item","arguments":{}}}`)
			got := make(chan string, 1)
			go func() {
				var seen []byte
				buf := make([]byte, 4096)
				for {
					n, err := resp.Body.Read(buf)
					seen = append(seen, buf[:n]...)
					if strings.Contains(string(seen), "notifications/tools/list_changed") || err != nil {
						got <- string(seen)
						return
					}
				}
			}()
			select {
			case s := <-got:
				if !strings.Contains(s, "notifications/tools/list_changed") {
					t.Fatalf("stream ended without list_changed: %q", s)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("no list_changed on the standing stream")
			}
		})
	}
}

// TestHost_movingCallRunsToTheEnd: a moving call whose client leaves, or whose timeout
// answers the client first, keeps running: the workflow records what the upstream did (the
// next call, allowed only in the state it moved to, is admitted).
func TestHost_movingCallRunsToTheEnd(t *testing.T) {
	for _, c := range []struct {
		name  string
		leave bool // the client leaves (else the tool's timeout answers it)
	}{{"client_leaves", true}, {"timeout_answers_first", false}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := exchangetest.Config("sample.json")
			if !c.leave {
				cfg, _ = sjson.SetBytes(cfg, `limits.tools.cart\.add_item.timeoutMs`, 100)
			}
			url := startHost(t, cfg, slowUpstream(t, 400*time.Millisecond).URL)
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"cart.add_item","arguments":{}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			req.Header.Set("Mcp-Session-Id", "s1")
			if !c.leave {
				req = req.WithContext(context.Background())
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if c.leave || !strings.Contains(string(b), "TOOL_TIMEOUT") {
					t.Fatalf("first call answered %s", b)
				}
			} else if !c.leave {
				t.Fatal(err)
			}
			// The next moving call waits for the first one's lease, then finds the workflow
			// moved: checkout is allowed only in has_items.
			if _, body := callTool(t, url, "cart.checkout"); strings.Contains(body, "TOOL_NOT_AVAILABLE") || !strings.Contains(body, `"ok"`) {
				t.Fatalf("checkout after the first call: %s", body)
			}
		})
	}
}
