package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A request whose context has already ended is not sent (net/http's Transport answers
// the context's error before writing a byte): on a kept connection it must not reach the
// server, which would act on a call nobody waits for.
func TestInline_aCancelledRequestIsNotSent(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	for i := 0; i < 20; i++ {
		resp, err := post(t, tr, context.Background(), s.URL, "warm")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		before := s.requests.Load()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if resp, err := post(t, tr, ctx, s.URL, "late"); err == nil {
			resp.Body.Close()
			t.Fatal("a request with an ended context answered no error")
		}
		time.Sleep(5 * time.Millisecond)
		if n := s.requests.Load() - before; n != 0 {
			t.Fatalf("round %d: a request whose context had ended reached the server %d times", i, n)
		}
	}
}

// An idempotent request that got part of an answer's head back is not sent again: the
// promise is "an idempotent one that got no byte of an answer" (net/http: Peek(1) first).
func TestInline_aGetWithAPartialAnswerIsNotSentAgain(t *testing.T) {
	var trunc atomic.Bool
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if trunc.Load() {
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Write([]byte("HTTP/1.1 200 OK\r\n"))
			c.Close()
			return
		}
		w.Write([]byte("ok"))
	})
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	trunc.Store(true)
	before := s.requests.Load()
	req, _ = http.NewRequest(http.MethodGet, s.URL, nil)
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a truncated answer gave no error")
	}
	if n := s.requests.Load() - before; n != 1 {
		t.Fatalf("a GET that got part of an answer reached the server %d times, want 1", n)
	}
}

// RoundTrip closes the request's body, even on errors (http.RoundTripper's contract;
// net/http's Transport does on a failed dial).
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

func TestInline_aFailedDialClosesTheBody(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	tr := &Inline{}
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", body)
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("dialling nothing answered no error")
	}
	if !body.closed.Load() {
		t.Fatal("the request's body was not closed after a failed dial")
	}
}

// Connections idle past IdleTimeout are closed, not kept open (holding a descriptor and,
// once the server times them out, a CLOSE_WAIT socket) for as long as newer ones serve.
func TestInline_connectionsIdlePastTheTimeoutAreClosed(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := &Inline{IdleTimeout: 100 * time.Millisecond}
	defer tr.CloseIdleConnections()
	// Three connections at once, all kept.
	var resps []*http.Response
	for i := 0; i < 3; i++ {
		resp, err := post(t, tr, context.Background(), s.URL, "x")
		if err != nil {
			t.Fatal(err)
		}
		resps = append(resps, resp)
	}
	for _, r := range resps {
		readAll(t, r)
	}
	if n := idleCount(tr); n != 3 {
		t.Fatalf("%d kept, want 3", n)
	}
	// Then one request at a time, for three timeouts.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		resp, err := post(t, tr, context.Background(), s.URL, "x")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		time.Sleep(10 * time.Millisecond)
	}
	if n := idleCount(tr); n > 1 {
		t.Fatalf("%d connections kept, 2 of them idle for 300 ms past a 100 ms IdleTimeout", n)
	}
	// And with no request at all.
	time.Sleep(250 * time.Millisecond)
	if n := idleCount(tr); n != 0 {
		t.Fatalf("%d connections kept 250 ms after the last request, IdleTimeout 100 ms", n)
	}
}

// An answer the server gives before it read the request's body (413, 401) reaches the
// caller, as with net/http's Transport, instead of a write error.
func TestInline_anEarlyAnswerToALargeBody(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		w.Write([]byte("too large"))
	})
	for _, rt := range []struct {
		name string
		rt   http.RoundTripper
	}{{"net/http", &http.Transport{}}, {"Inline", &Inline{}}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, strings.NewReader(strings.Repeat("b", 64<<20)))
		resp, err := rt.rt.RoundTrip(req)
		cancel()
		if err != nil {
			t.Errorf("%s: %v, want the 413", rt.name, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d, want 413", rt.name, resp.StatusCode)
		}
	}
}

var _ = errors.New

// A request body that fails to read fails its request at once (the connection did not
// fail: no answer is waited for).
type failingBody struct{ n int }

func (b *failingBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errors.New("client went away")
	}
	if len(p) > b.n {
		p = p[:b.n]
	}
	for i := range p {
		p[i] = 'b'
	}
	b.n -= len(p)
	return len(p), nil
}

func TestInline_aFailingRequestBodyFailsAtOnce(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, s.URL, io.NopCloser(&failingBody{n: 1 << 20}))
	done := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a failing request body answered no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a failing request body hung its request")
	}
}
