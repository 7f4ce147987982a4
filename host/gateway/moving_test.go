package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/gateway"
)

// A tools/call that can move a workflow and outlasts its timeout: the client gets its
// timeout answer at the timeout, whole, while the call runs on upstream (held here on a
// channel the test releases only after the client has its answer); once it ends, its
// transition is stored; and nothing else waits on it, of its client or of another.

// movingConfig: flip.move moves the session's workflow from a to b, under a 300 ms
// timeout; other.op is in no workflow.
var movingConfig = []byte(`{"version":1,"workflows":[{"id":"flip","initial":"a","key":"session",
  "states":{"a":{"on":{"NEXT":"b"}},"b":{"type":"final"}},
  "tools":{"flip.move":{"states":["a"],"event":"NEXT"}}}],
  "limits":{"tools":{"flip.move":{"timeoutMs":300}}}}`)

// holdingUpstream is an official-SDK upstream whose flip.move, called with hold, sends a
// progress notification when the call asked for it (an event stream is then under way),
// and answers only once release is closed.
type holdingUpstream struct {
	release  chan struct{}
	once     sync.Once
	arrived  chan struct{} // one per held call, once it is held
	mu       sync.Mutex
	finished int // held calls answered after the release
	dropped  int // held calls whose request ended first (cancelled by the gateway)
}

func newHoldingUpstream(jsonAnswers bool) (*holdingUpstream, http.Handler) {
	u := &holdingUpstream{release: make(chan struct{}), arrived: make(chan struct{}, 4)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "holding", Version: "1"}, nil)
	ok := func(text string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	}
	type moveArgs struct {
		Hold bool `json:"hold,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "flip.move"}, func(ctx context.Context, req *mcp.CallToolRequest, in moveArgs) (*mcp.CallToolResult, any, error) {
		if !in.Hold {
			return ok("moved"), nil, nil
		}
		if tok := req.Params.GetProgressToken(); tok != nil {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "working"})
		}
		u.arrived <- struct{}{}
		select {
		case <-u.release:
			u.mu.Lock()
			u.finished++
			u.mu.Unlock()
			return ok("moved"), nil, nil
		case <-ctx.Done():
			u.mu.Lock()
			u.dropped++
			u.mu.Unlock()
			return nil, nil, ctx.Err()
		}
	})
	type noArgs struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "other.op"}, func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
		return ok("done"), nil, nil
	})
	return u, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: jsonAnswers})
}

func (u *holdingUpstream) releaseOnce() { u.once.Do(func() { close(u.release) }) }

// counts returns how many held calls finished after the release, and how many were dropped.
func (u *holdingUpstream) counts() (finished, dropped int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.finished, u.dropped
}

// movingEnv: the gateway in front of a holding upstream, with a lease wait long enough that
// a call of the workflow made after the release waits for the held call's transition.
func movingEnv(t *testing.T, jsonAnswers bool) (*env, *holdingUpstream) {
	up, h := newHoldingUpstream(jsonAnswers)
	e := newEnv(t, envOptions{config: movingConfig, upstream: h, gateway: gateway.Options{LeaseWait: 20 * time.Second}})
	t.Cleanup(up.releaseOnce) // a test that failed early
	return e, up
}

// released releases the held call and checks that the workflow recorded it: the next
// flip.move (which waits for the held call's lease) is refused in state b.
func (u *holdingUpstream) released(t *testing.T, next func() *mcp.CallToolResult) {
	t.Helper()
	u.releaseOnce()
	res := next()
	if code := metaCode(res); code != abi.DenyToolNotAvailable || !strings.Contains(strings.Join(texts(res), " "), "is in state b") {
		t.Errorf("flip.move after the held one ended: %s %v; want %s in state b", code, texts(res), abi.DenyToolNotAvailable)
	}
	if finished, dropped := u.counts(); finished != 1 || dropped != 0 {
		t.Errorf("held calls: %d finished, %d dropped; want 1 finished (the call runs on after its timeout)", finished, dropped)
	}
}

// TestForward_timeoutOfMovingCall: with the official SDK as client (HTTP/1.1, keep-alive),
// a flip.move held upstream is answered TOOL_TIMEOUT while it is held; meanwhile the same
// client's next call, another session's call and another session's flip.move are
// answered (none waits on the held call's connection or goroutine); once released, the
// move is recorded.
func TestForward_timeoutOfMovingCall(t *testing.T) {
	e, up := movingEnv(t, true)
	connect := func() *client {
		c := &client{changed: make(chan struct{}, 16)}
		mc := mcp.NewClient(&mcp.Implementation{Name: "moving", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: &http.Client{Transport: tr}},
			&mcp.ClientSessionOptions{ProtocolVersion: sessionEra})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		c.cs = cs
		return c
	}
	// call fails rather than waits for ever on a call that would wait on the held one.
	call := func(c *client, name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		if args == nil {
			args = map[string]any{}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("call %s: %v", name, err)
		}
		return res
	}
	c, other := connect(), connect()
	call(c, "other.op", nil) // a connection to keep alive
	first := call(c, "flip.move", map[string]any{"hold": true})
	if code := metaCode(first); code != abi.DenyToolTimeout {
		t.Fatalf("held flip.move: %s %v; want %s", code, texts(first), abi.DenyToolTimeout)
	}
	// Still held: none of these may wait on it.
	if res := call(c, "other.op", nil); res.IsError || strings.Join(texts(res), "") != "done" {
		t.Errorf("the same client's next call: %v", texts(res))
	}
	if res := call(other, "other.op", nil); res.IsError || strings.Join(texts(res), "") != "done" {
		t.Errorf("another client's call: %v", texts(res))
	}
	if res := call(other, "flip.move", nil); metaCode(res) != "" || strings.Join(texts(res), "") != "moved" {
		t.Errorf("another session's flip.move: %s %v", metaCode(res), texts(res))
	}
	up.released(t, func() *mcp.CallToolResult { return call(c, "flip.move", nil) })
}

// TestForward_timeoutAnswerOfMovingCallIsWhole: over HTTP/1.1, the timeout answer of a
// held moving call has its Content-Length and closes the connection (the gateway's handler
// runs on); the client reads all of it while the call is held, and its next request, on
// the same keep-alive transport, is answered meanwhile.
func TestForward_timeoutAnswerOfMovingCallIsWhole(t *testing.T) {
	e, up := movingEnv(t, true)
	c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	sid := sessionWith(t, c, e.url)
	resp := postWith(t, c, e.url, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"flip.move","arguments":{"hold":true}}}`)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(body)) || !resp.Close ||
		!strings.Contains(string(body), abi.DenyToolTimeout) {
		t.Fatalf("timeout answer: %v %d Content-Length %d, close %v: %s; want 200, whole, Connection: close, %s",
			err, resp.StatusCode, resp.ContentLength, resp.Close, body, abi.DenyToolTimeout)
	}
	next := postWith(t, c, e.url, sid, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"other.op","arguments":{}}}`)
	out, _ := io.ReadAll(next.Body)
	next.Body.Close()
	if !strings.Contains(string(out), `"done"`) {
		t.Errorf("the client's next call while the first is held: %d %s", next.StatusCode, out)
	}
	up.released(t, func() *mcp.CallToolResult {
		return callResult(t, postWith(t, c, e.url, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"flip.move","arguments":{}}}`))
	})
}

// TestForward_timeoutOfMovingCallWhileItsStreamIsUnderWay: when the upstream's answer is an
// event stream already under way (a progress notification went out), the timeout adds
// the TOOL_TIMEOUT result as the stream's next event and the stream ends, while the call
// is held; another client's call is answered meanwhile; once released, the move is
// recorded.
func TestForward_timeoutOfMovingCallWhileItsStreamIsUnderWay(t *testing.T) {
	e, up := movingEnv(t, false)
	c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	sid := sessionWith(t, c, e.url)
	resp := postWith(t, c, e.url, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"flip.move","arguments":{"hold":true},"_meta":{"progressToken":"p1"}}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("held flip.move: %d %q; want an event stream", resp.StatusCode, ct)
	}
	br := bufio.NewReader(resp.Body)
	var events []string
	for {
		ev, err := readEvent(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the stream after %q: %v", events, err)
		}
		events = append(events, ev)
	}
	if len(events) != 2 || !strings.Contains(events[0], "notifications/progress") || !strings.Contains(events[1], abi.DenyToolTimeout) {
		t.Fatalf("the stream: %q; want the progress notification, then %s, then its end", events, abi.DenyToolTimeout)
	}
	other := sessionWith(t, &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}, e.url)
	if res := callResult(t, postWith(t, c, e.url, other, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"other.op","arguments":{}}}`)); strings.Join(texts(res), "") != "done" {
		t.Errorf("another client's call while the first is held: %v", texts(res))
	}
	up.released(t, func() *mcp.CallToolResult {
		return callResult(t, postWith(t, c, e.url, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"flip.move","arguments":{}}}`))
	})
}

// TestForward_movingCallRunsOnWhenItsClientLeaves: a client that leaves a held flip.move
// before its timeout leaves the call running: once released, the move is recorded.
func TestForward_movingCallRunsOnWhenItsClientLeaves(t *testing.T) {
	e, up := movingEnv(t, true)
	c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	sid := sessionWith(t, c, e.url)
	ctx, leave := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"flip.move","arguments":{"hold":true}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Mcp-Session-Id", sid)
	go func() {
		<-up.arrived
		leave()
	}()
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("held flip.move answered %d; want the client gone first", resp.StatusCode)
	}
	up.released(t, func() *mcp.CallToolResult {
		return callResult(t, postWith(t, c, e.url, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"flip.move","arguments":{}}}`))
	})
}

// TestForward_timeoutOfMovingCallOverHTTP2: over HTTP/2 a stream ends only when the
// gateway's handler returns; the held call's timeout answer still ends while it is held.
func TestForward_timeoutOfMovingCallOverHTTP2(t *testing.T) {
	e, up := movingEnv(t, true)
	srv := httptest.NewUnstartedServer(e.gw)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	c := srv.Client()
	c.Timeout = 10 * time.Second
	u := srv.URL + "/mcp"
	sid := sessionWith(t, c, u)
	resp := postWith(t, c, u, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"flip.move","arguments":{"hold":true}}}`)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.ProtoMajor != 2 || !strings.Contains(string(body), abi.DenyToolTimeout) {
		t.Fatalf("timeout answer: %v %s %d %s; want HTTP/2 and %s", err, resp.Proto, resp.StatusCode, body, abi.DenyToolTimeout)
	}
	up.released(t, func() *mcp.CallToolResult {
		return callResult(t, postWith(t, c, u, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"flip.move","arguments":{}}}`))
	})
}

// sessionWith opens a session through the gateway at url with client c.
func sessionWith(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp := postWith(t, c, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if sid == "" {
		t.Fatal("no session id")
	}
	r := postWith(t, c, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return sid
}

func postWith(t *testing.T, c *http.Client, url, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// callResult reads a tools/call's result off its answer (JSON, or the event stream's
// message with the result).
func callResult(t *testing.T, resp *http.Response) *mcp.CallToolResult {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	msg := string(body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range strings.Split(msg, "\n\n") {
			if d := eventData(ev); strings.Contains(d, `"result"`) {
				msg = d
			}
		}
	}
	var out struct {
		Result *mcp.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(msg), &out); err != nil || out.Result == nil {
		t.Fatalf("not a tools/call result (%v): %s", err, body)
	}
	return out.Result
}

// readEvent reads one event (its lines up to the blank line) off an event stream.
func readEvent(br *bufio.Reader) (string, error) {
	var ev strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && ev.Len() == 0 && line == "" {
				return "", io.EOF
			}
			return ev.String(), io.ErrUnexpectedEOF
		}
		if line == "\n" || line == "\r\n" {
			if ev.Len() == 0 {
				continue
			}
			return ev.String(), nil
		}
		ev.WriteString(line)
	}
}

// eventData is the data of one event (its data lines joined).
func eventData(ev string) string {
	var data []string
	for _, line := range strings.Split(ev, "\n") {
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
	}
	return strings.Join(data, "\n")
}
