package upstream

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
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"os"
	"runtime"
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

// rawServer answers each connection with handle, on a listener of its own.
func rawServer(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return "http://" + ln.Addr().String()
}

// readRequest reads one request (head and body) from br.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	r, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, r.Body)
	return r, nil
}

// A request that says Connection: close in its header (not only req.Close) is not kept
// after its answer, as net/http's Transport does (Request.wantsClose): the server closes
// it, and the next request would be sent on a dying connection.
func TestInline_aRequestHeaderConnectionCloseIsNotKept(t *testing.T) {
	url := rawServer(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			r, err := readRequest(br)
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			if strings.EqualFold(r.Header.Get("Connection"), "close") {
				time.Sleep(50 * time.Millisecond) // closes a little later, as it asked
				return
			}
		}
	})
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
	req.Header.Set("Connection", "close")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := idleCount(tr); n != 0 {
		t.Fatalf("%d kept after a request that said Connection: close, want 0", n)
	}
}

// Trailers are read, and the connection is kept after a chunked body with them.
func TestInline_trailers(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		w.Write([]byte("part one "))
		w.(http.Flusher).Flush()
		w.Write([]byte("part two"))
		w.Header().Set("X-Sum", "42")
	})
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	for i := 0; i < 2; i++ {
		resp, err := post(t, tr, context.Background(), s.URL, "x")
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "part one part two" || resp.Trailer.Get("X-Sum") != "42" {
			t.Fatalf("%q trailer %v", got, resp.Trailer)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// An HTTP/1.0 answer and an answer without a length are read to EOF and not kept.
func TestInline_answersReadToEOF(t *testing.T) {
	for _, head := range []string{"HTTP/1.0 200 OK\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\n"} {
		url := rawServer(t, func(c net.Conn) {
			defer c.Close()
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			c.Write([]byte(head + "hello"))
		})
		tr := &Inline{}
		resp, err := post(t, tr, context.Background(), url, "x")
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "hello" {
			t.Fatalf("%q: %q", head, got)
		}
		if n := idleCount(tr); n != 0 {
			t.Fatalf("%q: %d kept", head, n)
		}
		tr.CloseIdleConnections()
	}
}

// The context ending while the request is written (the server reads nothing) or while
// the answer's head is awaited interrupts at once.
func TestInline_cancelMidWriteAndMidHead(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	url := rawServer(t, func(c net.Conn) {
		defer c.Close()
		<-block // reads nothing, answers nothing
	})
	for _, size := range []int{10, 64 << 20} {
		tr := &Inline{}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		_, err := post(t, tr, ctx, url, strings.Repeat("b", size))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("body %d: %v, want the context's error", size, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("body %d: took %v", size, d)
		}
	}
}

// Closing bodies at random points while they are read never leaves a connection kept in
// the middle of an answer: every later answer is whole and its own.
func TestInline_closeRacingReadKeepsOnlyWholeAnswers(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == "big" {
			for i := 0; i < 64; i++ {
				w.Write(bytes.Repeat([]byte{'z'}, 4<<10))
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Write(b)
	})
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	for i := 0; i < 60; i++ {
		resp, err := post(t, tr, context.Background(), s.URL, "big")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			io.Copy(io.Discard, resp.Body)
			close(done)
		}()
		time.Sleep(time.Duration(i%6) * 300 * time.Microsecond)
		resp.Body.Close()
		<-done
		want := fmt.Sprintf("small %d", i)
		resp, err = post(t, tr, context.Background(), s.URL, want)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != want {
			t.Fatalf("round %d: %q, want %q", i, got, want)
		}
	}
}

// A request body that goes on after the answer's head came (full duplex: a streamed
// upload the server answers as it reads) works with net/http's Transport; Inline writes
// the whole body before it reads a byte of the answer, so the two wait on each other.
// Known, not fixed (it needs a writing goroutine for bodies not in memory): run with
// STATEGATE_INLINE_KNOWN=1.
func TestInline_fullDuplexBody(t *testing.T) {
	if os.Getenv("STATEGATE_INLINE_KNOWN") == "" {
		t.Skip("known limitation; STATEGATE_INLINE_KNOWN=1 runs it")
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		w.Write([]byte("head "))
		w.(http.Flusher).Flush()
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	s.Start()
	defer s.Close()
	for _, rt := range []struct {
		name string
		rt   http.RoundTripper
	}{{"net/http", &http.Transport{}}, {"Inline", &Inline{}}} {
		pr, pw := io.Pipe()
		req, _ := http.NewRequest(http.MethodPost, s.URL, pr)
		go pw.Write([]byte("one "))
		type result struct {
			resp *http.Response
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := rt.rt.RoundTrip(req)
			done <- result{resp, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				t.Errorf("%s: %v", rt.name, r.err)
				continue
			}
			pw.Write([]byte("two"))
			pw.Close()
			if got := readAll(t, r.resp); got != "head one two" {
				t.Errorf("%s: %q", rt.name, got)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("%s: no answer's head in 2 s while the body is still open", rt.name)
			pw.CloseWithError(errors.New("test over"))
		}
	}
}

// An informational answer reaches the request's httptrace.Got1xxResponse, as net/http's
// Transport gives it: httputil.ReverseProxy (the gateway's plain proxy) forwards 1xx
// answers (103 Early Hints) to its client through it.
func TestInline_informationalAnswersReachTheTrace(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Write([]byte("final"))
	})
	for _, rt := range []struct {
		name string
		rt   http.RoundTripper
	}{{"net/http", &http.Transport{}}, {"Inline", &Inline{}}} {
		var got []string
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				got = append(got, fmt.Sprint(code, " ", h.Get("Link")))
				return nil
			},
		})
		resp, err := post(t, rt.rt, ctx, s.URL, "x")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if strings.Join(got, ",") != "103 </style.css>; rel=preload" {
			t.Errorf("%s: Got1xxResponse saw %q", rt.name, got)
		}
	}
	// Through a ReverseProxy, the client sees the 103.
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(mustParse(t, s.URL)) },
		Transport: &Inline{},
	})
	defer proxy.Close()
	var hints int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error { hints++; return nil },
	})
	resp, err := post(t, &http.Transport{}, ctx, proxy.URL, "x")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if hints != 1 {
		t.Errorf("through a ReverseProxy over Inline the client got %d 103s, want 1", hints)
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A server that answers before it read the request's body, then neither reads nor closes:
// net/http's Transport hands the answer over; Inline waits in its write until the context
// ends. Known, not fixed (it needs the answer read while the body is written): run with
// STATEGATE_INLINE_KNOWN=1.
func TestInline_anEarlyAnswerFromAServerThatStopsReading(t *testing.T) {
	if os.Getenv("STATEGATE_INLINE_KNOWN") == "" {
		t.Skip("known limitation; STATEGATE_INLINE_KNOWN=1 runs it")
	}
	url := rawServer(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		time.Sleep(5 * time.Second) // neither reads nor closes for a while
	})
	for _, rt := range []struct {
		name string
		rt   http.RoundTripper
	}{{"net/http", &http.Transport{}}, {"Inline", &Inline{}}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := post(t, rt.rt, ctx, url, strings.Repeat("b", 64<<20))
		cancel()
		if err != nil {
			t.Errorf("%s: %v, want the 401", rt.name, err)
			continue
		}
		resp.Body.Close()
	}
}

// Exchanges that end every way (whole, closed early, cancelled, dropped by the server,
// refused) leave no goroutine behind once their connections are closed.
func TestInline_noGoroutineLeftBehind(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/drop":
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Close()
		case "/slow":
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		default:
			w.Write(bytes.Repeat([]byte("a"), 100<<10))
		}
	})
	tr := &Inline{}
	run := func() {
		for i := 0; i < 20; i++ {
			for _, path := range []string{"/", "/drop", "/slow"} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				resp, err := post(t, tr, ctx, s.URL+path, "x")
				if err == nil {
					if i%2 == 0 {
						io.Copy(io.Discard, resp.Body)
					}
					resp.Body.Close()
				}
				cancel()
			}
		}
	}
	run() // warms up the server's goroutines and the test's
	tr.CloseIdleConnections()
	s.CloseClientConnections()
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	run()
	tr.CloseIdleConnections()
	s.CloseClientConnections()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after, %d before", n, before)
	}
}

// A kept connection on which the server sent bytes nobody asked for is not used: the next
// answer is its own.
func TestInline_unsolicitedBytesDropTheConnection(t *testing.T) {
	var conns atomic.Int64
	url := rawServer(t, func(c net.Conn) {
		defer c.Close()
		n := conns.Add(1)
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			body := fmt.Sprint("conn ", n)
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			time.Sleep(10 * time.Millisecond)
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"))
		}
	})
	tr := &Inline{}
	defer tr.CloseIdleConnections()
	for i := 1; i <= 3; i++ {
		resp, err := post(t, tr, context.Background(), url, "x")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := readAll(t, resp), fmt.Sprint("conn ", i); got != want {
			t.Fatalf("answer %d: %q, want %q", i, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
