package extismnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bigResourceServer is an MCP server on the official Go SDK (stateless, JSON answers) with
// one resource, file:///big, of about n bytes of text; a request with the token "wrong" is
// answered 401 with a challenge naming the upstream's metadata.
func bigResourceServer(t *testing.T, n int) string {
	t.Helper()
	var text strings.Builder
	for i := 0; text.Len() < n; i++ {
		fmt.Fprintf(&text, "line %d: \"quoted\", <tag> & \\ \u00e9\n", i)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	s.AddResource(&mcp.Resource{URI: "file:///big", Name: "big", MIMEType: "text/plain"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///big", MIMEType: "text/plain", Text: text.String()}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer wrong" {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestHost_passedThroughAnswerIsPiped: with a public URL, a passed-through request's answer
// is read by the module for its head only (pipe) and the host writes the rest: a
// resources/read of 4 MB from a server on the official Go SDK reaches the client byte for
// byte as the server sent it; a notification answered 401 still has its challenge
// rewritten, its body unchanged.
func TestHost_passedThroughAnswerIsPiped(t *testing.T) {
	up := bigResourceServer(t, 4<<20)
	gw := startGateway(t, up, nil, "--public-url", "http://gateway.example:8080")
	post := func(url, body, token string) (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	const read = `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///big"}}`
	direct, want := post(up, read, "")
	resp, got := post(gw, read, "")
	if direct.StatusCode != 200 || len(want) < 4<<20 {
		t.Fatalf("the upstream answered %d with %d bytes", direct.StatusCode, len(want))
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != direct.Header.Get("Content-Type") || !bytes.Equal(got, want) {
		t.Fatalf("through the host: %d %q, %d bytes (equal: %v); want 200 %q, the upstream's %d bytes",
			resp.StatusCode, resp.Header.Get("Content-Type"), len(got), bytes.Equal(got, want), direct.Header.Get("Content-Type"), len(want))
	}

	const note = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	_, wantBody := post(up, note, "wrong")
	resp, body := post(gw, note, "wrong")
	if resp.StatusCode != http.StatusUnauthorized || !bytes.Equal(body, wantBody) {
		t.Fatalf("a notification with a wrong token: %d %q; want 401 %q", resp.StatusCode, body, wantBody)
	}
	if c, want := resp.Header.Get("WWW-Authenticate"), `resource_metadata="http://gateway.example:8080/.well-known/oauth-protected-resource/mcp"`; !strings.Contains(c, want) {
		t.Errorf("challenge %q; want it to name %s", c, want)
	}
}

// TestHost_clientLeavingAPipedAnswerAbortsTheUpstream: a client that leaves while a piped
// answer still streams has the upstream request aborted (the module, which let the answer
// go at its head, is not called), and the host goes on serving.
func TestHost_clientLeavingAPipedAnswerAbortsTheUpstream(t *testing.T) {
	aborted := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), "resources/read") {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":3,"result":{"contents":[{"uri":"file:///slow","text":"`+strings.Repeat("x", 4096))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(aborted)
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	gw := startGateway(t, up.URL+"/mcp", nil, "--public-url", "http://gateway.example:8080")
	send := func(body string) *http.Response {
		req, _ := http.NewRequest("POST", gw, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := send(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///slow"}}`)
	if _, err := io.ReadFull(resp.Body, make([]byte, 4096)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d, the first bytes: %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	select {
	case <-aborted:
	case <-time.After(8 * time.Second):
		t.Fatal("the client left; the upstream request was not aborted")
	}
	if resp := send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("after a client left: %d; want 202", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
}

// TestHost_passedThroughAnswerHasBackpressure: a client that reads nothing holds the
// upstream back: a passed-through GET whose upstream writes 128 MB as fast as it can gets
// no further than the socket buffers between them (under 32 MB) before its writes block,
// with or without a public URL (with one, the module pipes the answer at its head and the
// host writes the rest). The measure is bytes the upstream wrote, never time.
func TestHost_passedThroughAnswerHasBackpressure(t *testing.T) {
	const total, bound = 128 << 20, 32 << 20
	for _, args := range [][]string{nil, {"--public-url", "http://gateway.example:8080"}} {
		t.Run(fmt.Sprintf("%q", args), func(t *testing.T) {
			var sent atomic.Int64
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/octet-stream")
				buf := make([]byte, 64<<10)
				for sent.Load() < total {
					if _, err := w.Write(buf); err != nil {
						return
					}
					sent.Add(int64(len(buf)))
				}
			}))
			t.Cleanup(up.Close)
			gw := startGateway(t, up.URL+"/mcp", nil, args...)
			c := rawRequest(t, gw, "GET", "/mcp", "")
			defer c.Close()
			// Wait until the upstream's writes block (no progress for a second) or it sent all.
			last, still := int64(-1), 0
			for deadline := time.Now().Add(60 * time.Second); still < 10 && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
				n := sent.Load()
				if n >= total {
					break
				}
				if n == last {
					still++
				} else {
					last, still = n, 0
				}
			}
			t.Logf("the upstream wrote %d MB to a client that read nothing", sent.Load()>>20)
			if n := sent.Load(); n >= bound {
				t.Errorf("the upstream wrote %d MB to a client that read nothing; want under %d MB (backpressure)", n>>20, bound>>20)
			}
		})
	}
}

// TestHost_brokenPipedAnswerAbortsTheClient: an upstream that breaks off a passed-through
// answer (a chunked body cut mid-chunk, or fewer bytes than its Content-Length) has the
// client's connection aborted, with or without a public URL: the client reads an error,
// never a complete answer.
func TestHost_brokenPipedAnswerAbortsTheClient(t *testing.T) {
	for _, declared := range []bool{false, true} {
		for _, args := range [][]string{nil, {"--public-url", "http://gateway.example:8080"}} {
			t.Run(fmt.Sprintf("content-length %v %q", declared, args), func(t *testing.T) {
				up := brokenUpstream(t, declared)
				gw := startGateway(t, up, nil, args...)
				c := rawRequest(t, gw, "POST", "/mcp", `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}`)
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				var timeout net.Error
				if errors.As(err, &timeout) && timeout.Timeout() {
					t.Errorf("HTTP %d: the client read %d bytes, then waited for the rest for 20 s; want the connection aborted", resp.StatusCode, len(b))
				} else if err == nil {
					t.Errorf("HTTP %d, Content-Length %q, %v: the broken-off answer reached the client as a complete %d-byte body", resp.StatusCode, resp.Header.Get("Content-Length"), resp.TransferEncoding, len(b))
				} else if !strings.HasPrefix(string(b), `{"jsonrpc":"2.0","id":3`) {
					t.Errorf("read %q before %v; want the upstream's first bytes", b, err)
				}
			})
		}
	}
}

// brokenUpstream answers every request with a body it breaks off: its first part, then (a
// moment later, so that it is read on its own) a part of a second, then it closes the
// connection; the body chunked and cut mid-chunk, or declared 1000 bytes longer than sent
// (Content-Length) when declared.
func brokenUpstream(t *testing.T, declared bool) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		first, second := `{"jsonrpc":"2.0","id":3,"result":{"contents":[{"uri":"file:///a","text":"`, strings.Repeat("x", 100)
		_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
		if declared {
			fmt.Fprintf(rw, "Content-Length: %d\r\n\r\n%s", len(first)+len(second)+1000, first)
		} else {
			fmt.Fprintf(rw, "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(first), first)
		}
		_ = rw.Flush()
		time.Sleep(100 * time.Millisecond)
		if declared {
			_, _ = rw.WriteString(second)
		} else {
			fmt.Fprintf(rw, "%x\r\n%s", len(second)+1000, second)
		}
		_ = rw.Flush()
		time.Sleep(100 * time.Millisecond)
	}))
	t.Cleanup(up.Close)
	return up.URL + "/mcp"
}

// rawRequest sends a request to the gateway at gw over a connection of its own (written as
// is, a path sent byte for byte) and answers the connection, its response unread.
func rawRequest(t *testing.T, gw, method, path, body string) net.Conn {
	t.Helper()
	u, err := url.Parse(gw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s", method, path, u.Host, len(body), body)
	return c
}
