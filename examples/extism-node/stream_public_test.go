package extismnode

import (
	"bufio"
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
			up, seen := streamingUpstream(t)
			gw := startGateway(t, up, nil, "--public-url", "http://gateway.example:8080")
			resp := sendStreaming(t, gw, method)
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
