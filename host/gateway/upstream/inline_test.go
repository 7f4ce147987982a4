package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is an httptest server that counts the connections it accepted and the
// requests it handled.
type countingServer struct {
	*httptest.Server
	conns, requests atomic.Int64
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func post(t *testing.T, rt http.RoundTripper, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return rt.RoundTrip(req)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	return string(b)
}

func TestInline_keepsAConnectionForTheNextRequest(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	for i := 0; i < 5; i++ {
		body := fmt.Sprintf(`{"n":%d}`, i)
		resp, err := post(t, tr, context.Background(), s.URL+"/mcp", body)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != body || resp.StatusCode != 200 {
			t.Fatalf("answer %d: %d %q", i, resp.StatusCode, got)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("five requests in turn used %d connections, want 1", n)
	}
}

func TestInline_aConnectionTheServerClosedIsNotUsed(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	for i := 0; i < 3; i++ {
		resp, err := post(t, tr, context.Background(), s.URL, "x")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		readAll(t, resp)
		s.CloseClientConnections() // the server ends the kept connection while it is idle
		time.Sleep(20 * time.Millisecond)
	}
	if r, c := s.requests.Load(), s.conns.Load(); r != 3 || c != 3 {
		t.Fatalf("requests %d over %d connections, want 3 over 3", r, c)
	}
}

// A POST the server read and then dropped without answering reached the server: it is
// not sent again (the server may have acted on it); an idempotent GET is.
func TestInline_aSentPostIsNeverSentTwice(t *testing.T) {
	s, drop := droppingServer(t)
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	keepOne(t, tr, s.URL)
	drop.Store(true)
	before := s.requests.Load()
	if _, err := post(t, tr, context.Background(), s.URL, "once"); err == nil {
		t.Fatal("a dropped POST answered no error")
	}
	if n := s.requests.Load() - before; n != 1 {
		t.Fatalf("the dropped POST reached the server %d times, want 1", n)
	}

	// A GET on a kept connection that the server drops with no answer is sent again once.
	drop.Store(false)
	keepOne(t, tr, s.URL)
	drop.Store(true)
	before = s.requests.Load()
	req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a GET the server always drops answered no error")
	}
	if n := s.requests.Load() - before; n != 2 {
		t.Fatalf("the dropped GET reached the server %d times, want 2 (sent again once)", n)
	}
}

// The request's context ending interrupts a body being read, and its connection is not
// kept.
func TestInline_cancelInterruptsTheBody(t *testing.T) {
	release := make(chan struct{})
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := post(t, tr, ctx, s.URL, "x")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "first") {
		t.Fatalf("first event: %q %v", buf[:n], err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled body ended with no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling did not interrupt the body's read")
	}
	resp.Body.Close()
	if n := idleCount(tr); n != 0 {
		t.Fatalf("%d connections kept after a cancelled body, want 0", n)
	}
}

// Closing a body interrupts a Read blocked on it, as net/http's bodies do.
func TestInline_closeInterruptsARead(t *testing.T) {
	release := make(chan struct{})
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), s.URL, "x")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	resp.Body.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not interrupt the body's read")
	}
	// The next request still works (on a new connection).
	resp, err = post(t, tr, context.Background(), s.URL+"/?", "y")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// A body closed before its end, an answer that says Connection: close, and an HTTP/1.0
// answer leave no connection kept; an answer without a body (204, HEAD) keeps it.
func TestInline_whenAConnectionIsKept(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/big":
			w.Write(bytes.Repeat([]byte("a"), 1<<20))
		default:
			w.Write([]byte("ok"))
		}
	})
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	for _, c := range []struct {
		method, path string
		readAll      bool
		kept         int
	}{
		{"POST", "/close", true, 0},
		{"POST", "/empty", false, 1},
		{"HEAD", "/", false, 1},
		{"POST", "/big", false, 0}, // closed unread
		{"POST", "/big", true, 1},
		{"GET", "/", true, 1},
	} {
		tr.CloseIdleConnections()
		req, _ := http.NewRequest(c.method, s.URL+c.path, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		if c.readAll {
			io.ReadAll(resp.Body)
		}
		resp.Body.Close()
		if n := idleCount(tr); n != c.kept {
			t.Errorf("%s %s (read to the end: %v): %d connections kept, want %d", c.method, c.path, c.readAll, n, c.kept)
		}
	}
}

// Informational answers (103 Early Hints) are read past to the final one.
func TestInline_informationalAnswers(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Write([]byte("final"))
	})
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), s.URL, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.StatusCode != 200 || got != "final" {
		t.Fatalf("got %d %q, want 200 final", resp.StatusCode, got)
	}
}

// https and Upgrade requests go to the fallback; the dial's error is net's (the gateway
// tells an unreachable upstream by it).
func TestInline_fallbackAndDialErrors(t *testing.T) {
	var fell []string
	tr := &Inline{Fallback: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		fell = append(fell, r.URL.Scheme+" "+r.Header.Get("Upgrade"))
		return nil, errors.New("fallback")
	})}
	req, _ := http.NewRequest(http.MethodPost, "https://example.test/mcp", nil)
	tr.RoundTrip(req)
	req, _ = http.NewRequest(http.MethodGet, "http://example.test/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	tr.RoundTrip(req)
	if strings.Join(fell, ",") != "https ,http websocket" {
		t.Fatalf("fallback got %q", fell)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err := post(t, tr, context.Background(), "http://"+addr+"/mcp", "x")
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("dialling nothing: %v, want a dial *net.OpError", err)
	}
}

// A connection idle past IdleTimeout is not used again.
func TestInline_idleTimeout(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := &Inline{IdleTimeout: 30 * time.Millisecond}
	defer tr.CloseIdleConnections()
	for i := 0; i < 2; i++ {
		resp, err := post(t, tr, context.Background(), s.URL, "x")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		time.Sleep(60 * time.Millisecond)
	}
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the first was idle too long)", n)
	}
}

// Many requests at once, each answered with its own body (run with -race).
func TestInline_concurrent(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := &Inline{MaxIdlePerHost: 4}
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	errs := make(chan error, 16*40)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				body := fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat("b", i*100))
				req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(body))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					errs <- err
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != body {
					errs <- fmt.Errorf("answer %q (%v), want %q", b, err, body)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := idleCount(tr); n > 4 {
		t.Fatalf("%d connections kept, above MaxIdlePerHost 4", n)
	}
}

// droppingServer answers "ok", or, once drop is set, reads a request and closes its
// connection without answering.
func droppingServer(t *testing.T) (*countingServer, *atomic.Bool) {
	drop := &atomic.Bool{}
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		if drop.Load() {
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Close()
			return
		}
		w.Write([]byte("ok"))
	})
	return s, drop
}

// keepOne makes a request to url whose answer is read whole, so that tr keeps a connection.
func keepOne(t *testing.T, tr *Inline, url string) {
	t.Helper()
	resp, err := post(t, tr, context.Background(), url, "warm")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func idleCount(t *Inline) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, l := range t.idle {
		n += len(l)
	}
	return n
}

// An answer whose head never ends fails its request at maxHead instead of filling memory.
func TestInline_anEndlessHeadFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		c.Read(buf)
		c.Write([]byte("HTTP/1.1 200 OK\r\n"))
		line := []byte("X-Filler: " + strings.Repeat("f", 1000) + "\r\n")
		for i := 0; i < 4<<10; i++ { // 4 MB of headers, never ended
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	}()
	tr := &Inline{}
	_, err = post(t, tr, context.Background(), "http://"+ln.Addr().String()+"/mcp", "x")
	if err == nil || !strings.Contains(err.Error(), "head is over") {
		t.Fatalf("an endless head: %v, want the head limit's error", err)
	}
}

// A body read to its end answers io.EOF again, as net/http's do; a closed one an error.
func TestInline_readsAfterTheEnd(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), s.URL, "abc")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "abc" {
		t.Fatalf("%q %v", b, err)
	}
	if n, err := resp.Body.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("a read after the end: %d %v, want 0 EOF", n, err)
	}
	resp.Body.Close()
	if n := idleCount(tr); n != 1 {
		t.Fatalf("%d kept after a body read to its end and closed, want 1", n)
	}
}

// A POST with an Idempotency-Key that a kept connection dropped with no answer is sent again
// once, as net/http sends it (its key makes a second delivery safe for the server).
func TestInline_anIdempotencyKeyMakesAPostReplayable(t *testing.T) {
	s, drop := droppingServer(t)
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	keepOne(t, tr, s.URL)
	drop.Store(true)
	before := s.requests.Load()
	req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("keyed"))
	req.Header.Set("Idempotency-Key", "k1")
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a POST the server always drops answered no error")
	}
	if n := s.requests.Load() - before; n != 2 {
		t.Fatalf("the keyed POST reached the server %d times, want 2 (sent again once)", n)
	}
}

// At most five informational answers come before the final one, as with net/http.
func TestInline_informationalAnswersAreBounded(t *testing.T) {
	for _, c := range []struct {
		hints int
		ok    bool
	}{{5, true}, {6, false}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			conn.Read(make([]byte, 4096))
			for i := 0; i < c.hints; i++ {
				conn.Write([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"))
			}
			conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		}()
		tr := &Inline{}
		resp, err := post(t, tr, context.Background(), "http://"+ln.Addr().String()+"/mcp", "x")
		if c.ok != (err == nil) {
			t.Errorf("%d informational answers: err %v, want ok %v", c.hints, err, c.ok)
		}
		if err == nil {
			if got := readAll(t, resp); got != "ok" {
				t.Errorf("%d informational answers: final answer %q", c.hints, got)
			}
		}
		tr.CloseIdleConnections()
		ln.Close()
	}
}
