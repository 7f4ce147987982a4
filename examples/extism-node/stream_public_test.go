package extismnode

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// With a public URL every forward's answer is read by the module for its challenges; a
// stream must still reach the client as it arrives: the standalone GET stream's first
// event and a POST's SSE notification are at the client before the upstream sends more.
func TestHost_streamsWithPublicURL(t *testing.T) {
	for _, method := range []string{"GET", "POST"} {
		t.Run(method, func(t *testing.T) {
			seen := make(chan struct{})
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
			gw := startGateway(t, s.URL+"/mcp", nil, "--public-url", "http://gateway.example:8080")
			var body io.Reader
			if method == "POST" {
				body = strings.NewReader(callBody("countries.list"))
			}
			req, _ := http.NewRequest(method, gw, body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", "sse-public")
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got := make(chan string, 1)
			go func() {
				r := bufio.NewReader(resp.Body)
				a, _ := r.ReadString('\n')
				b, _ := r.ReadString('\n')
				got <- a + b
			}()
			select {
			case first := <-got:
				close(seen)
				if !strings.Contains(first, "notifications/progress") {
					t.Errorf("first event = %q; want the progress notification", first)
				}
			case <-time.After(8 * time.Second):
				close(seen)
				t.Fatalf("HTTP %d: the first event did not reach the client while the upstream held the stream open", resp.StatusCode)
			}
		})
	}
}
