package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// pipeHost serves a Host in front of upstream, with publicURL (may be ""), and answers its
// address.
func pipeHost(t *testing.T, upstream, publicURL string) string {
	t.Helper()
	h, err := New(context.Background(), Options{Module: loadModule(t), Config: exchangetest.Config("sample.json"), Upstream: upstream, PublicURL: publicURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// rawRequest sends a request to addr over a connection of its own and answers the
// connection, its response unread.
func rawRequest(t *testing.T, addr, method, path, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s", method, path, addr, len(body), body)
	return c
}

// TestHost_brokenPipedAnswerAbortsTheClient: an upstream that breaks off a passed-through
// answer (a chunked body cut mid-chunk, or fewer bytes than its Content-Length) has the
// client's connection aborted, with or without a public URL (with one, the module pipes the
// answer at its head): the client reads an error (or the module's 502, should the break
// come with the head), never a complete answer.
func TestHost_brokenPipedAnswerAbortsTheClient(t *testing.T) {
	for _, declared := range []bool{false, true} {
		for _, public := range []string{"", "https://gw.example"} {
			t.Run(fmt.Sprintf("content-length %v public %q", declared, public), func(t *testing.T) {
				up := brokenUpstream(t, declared)
				c := rawRequest(t, pipeHost(t, up, public), "POST", "/mcp", `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}`)
				c.SetDeadline(time.Now().Add(20 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				var timeout net.Error
				switch {
				case errors.As(err, &timeout) && timeout.Timeout():
					t.Errorf("HTTP %d: the client read %d bytes, then waited for the rest for 20 s; want the connection aborted", resp.StatusCode, len(b))
				case err == nil && resp.StatusCode != http.StatusBadGateway: // 502: the module's answer when the break comes with the head
					t.Errorf("HTTP %d, Content-Length %q, %v: the broken-off answer reached the client as a complete %d-byte body", resp.StatusCode, resp.Header.Get("Content-Length"), resp.TransferEncoding, len(b))
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
		io.Copy(io.Discard, r.Body)
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		first, second := `{"jsonrpc":"2.0","id":3,"result":{"contents":[{"uri":"file:///a","text":"`, strings.Repeat("x", 100)
		rw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
		if declared {
			fmt.Fprintf(rw, "Content-Length: %d\r\n\r\n%s", len(first)+len(second)+1000, first)
		} else {
			fmt.Fprintf(rw, "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(first), first)
		}
		rw.Flush()
		time.Sleep(100 * time.Millisecond)
		if declared {
			rw.WriteString(second)
		} else {
			fmt.Fprintf(rw, "%x\r\n%s", len(second)+1000, second)
		}
		rw.Flush()
		time.Sleep(100 * time.Millisecond)
	}))
	t.Cleanup(up.Close)
	return up.URL + "/mcp"
}

// TestHost_passedThroughAnswerHasBackpressure: a client that reads nothing holds the
// upstream back: a passed-through GET whose upstream writes 128 MB as fast as it can gets no
// further than the buffers between them (under 32 MB) before its writes block, with or
// without a public URL. The measure is bytes the upstream wrote, never time.
func TestHost_passedThroughAnswerHasBackpressure(t *testing.T) {
	const total, bound = 128 << 20, 32 << 20
	for _, public := range []string{"", "https://gw.example"} {
		t.Run(fmt.Sprintf("public %q", public), func(t *testing.T) {
			var sent atomic.Int64
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
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
			rawRequest(t, pipeHost(t, up.URL+"/mcp", public), "GET", "/mcp", "")
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

// TestHost_redirectReachesTheClient: an upstream's redirect is the client's to follow: the
// host sends the forwarded request once, as given, and passes the 307 on (following it would
// send a tools/call a second time, to another URL, with the client's Authorization).
func TestHost_redirectReachesTheClient(t *testing.T) {
	var other atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/other" {
			other.Add(1)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ran twice"}]}}`)
			return
		}
		http.Redirect(w, r, "/other", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(up.Close)
	for _, public := range []string{"", "https://gw.example"} {
		c := rawRequest(t, pipeHost(t, up.URL+"/mcp", public), "POST", "/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"countries.list","arguments":{}}}`)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect || other.Load() != 0 {
			t.Errorf("public %q: HTTP %d, the redirect's target asked %d times; want the 307 passed on and the target never asked", public, resp.StatusCode, other.Load())
		}
	}
}
