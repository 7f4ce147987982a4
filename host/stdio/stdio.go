// Package stdio is `stategate stdio`: the gateway for one desktop client, in process, with
// the client's JSON-RPC on stdin and stdout (the bridge) and the gateway on a listener only
// this process can reach.
package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/sse"
	"github.com/stategate/stategate/host/serve"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Options are what `stategate stdio` runs: the configuration, the server it fronts and
// the gateway's options (serve.Run's).
type Options struct {
	ConfigPath string
	Upstream   serve.Upstream
	Serve      serve.Options
	Ops        serve.OpsOptions
	Logger     *slog.Logger // on stderr: stdout is the protocol's
}

// EndedError is why a stdio session ended before its client closed stdin (the server's
// child died, say).
type EndedError struct{ Cause error }

func (e *EndedError) Error() string { return e.Cause.Error() }
func (e *EndedError) Unwrap() error { return e.Cause }

// Run is `stategate stdio`: what a desktop client's mcpServers entry runs. The client
// speaks newline-delimited JSON-RPC on stdin and stdout; stategate runs the gateway in
// this process, on a listener only this process can reach (memListener), and is its client
// (bridge): every message goes through the same handler, exchange core and upstream
// transport as `serve`, so everything the HTTP gateway does holds here. The server is a
// child (a command after --) or an HTTP one (--upstream URL).
func Run(ctx context.Context, o Options, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, eng, err := serve.LoadValidated(o.ConfigPath, o.Logger)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.Upstream.Sessions != nil {
		o.Upstream.Sessions.SetEnded(func(_ string, err error) { cancel(err) }) // the child died
	}
	ln := newMemListener()
	o.Serve.Listener, o.Serve.Listen = ln, "stdio"
	served := make(chan error, 1)
	go func() {
		err := serve.Run(ctx, o.ConfigPath, cfg, eng, o.Upstream, o.Serve, o.Ops, o.Logger, stderr) // stdout is the protocol's
		if err != nil {
			cancel(err)
		}
		served <- err
	}()
	b := &bridge{client: &http.Client{Transport: &http.Transport{DialContext: ln.dial, DisableCompression: true}},
		url: "http://stdio/mcp", out: stdout, log: o.Logger}
	b.run(ctx, stdin)
	cancel(nil)
	serveErr := <-served
	ln.Close()
	if o.Upstream.Sessions != nil {
		o.Upstream.Sessions.Close()
	}
	if serveErr != nil {
		return serveErr
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return &EndedError{Cause: cause}
	}
	return nil
}

// bridge is the gateway's client for the stdio client: each line from stdin is POSTed
// to the gateway; each JSON-RPC message in the answer (JSON, or SSE event by event) goes
// to stdout as a line, and so does every message on the session's GET stream.
type bridge struct {
	client *http.Client
	url    string
	log    *slog.Logger

	outMu sync.Mutex
	out   io.Writer

	mu       sync.Mutex
	session  string
	protocol string
	stopGet  context.CancelFunc
	inflight sync.WaitGroup
}

// run reads stdin until it closes or ctx ends, then ends the session (its child too).
func (b *bridge) run(ctx context.Context, stdin io.Reader) {
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		r := bufio.NewReaderSize(stdin, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for done := false; !done; {
		select {
		case line, ok := <-lines:
			if !ok {
				done = true
				break
			}
			line = bytes.TrimSpace(line)
			if gjson.GetBytes(line, "method").Str == "initialize" {
				b.endSession()    // a client that initializes again starts afresh
				b.post(ctx, line) // in order: later messages carry its session
				continue
			}
			b.inflight.Add(1)
			go func() { defer b.inflight.Done(); b.post(ctx, line) }()
		case <-ctx.Done():
			done = true
		}
	}
	// Answers to calls in flight still go out (the child's death answers them at once);
	// then the session, and its child, end.
	waited := make(chan struct{})
	go func() { b.inflight.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
	}
	b.endSession()
}

// write sends msg to the client as one line when it is one JSON-RPC message (see message),
// and reports whether it did. Anything else is never written: a client reads stdout line
// by line, so bytes that are not one message (two messages joined by a newline, an event
// the gateway could not read) would reach it as messages the gateway never checked.
func (b *bridge) write(msg []byte) bool {
	line, ok := message(msg)
	if !ok {
		if len(bytes.TrimSpace(msg)) > 0 {
			b.log.Warn("stdio: withheld what is not one JSON-RPC message", "bytes", len(msg))
		}
		return false
	}
	b.outMu.Lock()
	defer b.outMu.Unlock()
	b.out.Write(append(line, '\n'))
	return true
}

// message returns msg as one line: msg must be exactly one JSON value, an object whose
// "jsonrpc" is "2.0" and that names no member twice at its top level (a client reads the
// last of them, the gateway the first). It is compacted: the line holds no newline.
func message(msg []byte) ([]byte, bool) {
	msg = bytes.TrimSpace(msg)
	if len(msg) == 0 || msg[0] != '{' || jsonx.Validate(msg, admission.MaxDepth) != nil {
		return nil, false
	}
	var keys jsonx.Keys
	it := jsonx.Object(string(msg), 0)
	for key, _, more := it.Next(); more; key, _, more = it.Next() {
		if keys.Repeats(key) {
			return nil, false
		}
	}
	if v := gjson.GetBytes(msg, "jsonrpc"); v.Type != gjson.String || v.Str != "2.0" {
		return nil, false
	}
	var c bytes.Buffer
	if json.Compact(&c, msg) != nil {
		return nil, false
	}
	return c.Bytes(), true
}

// answers reports whether msg (one message, as message accepts it) is an answer to the
// request whose id is id.
func answers(msg []byte, id gjson.Result) bool {
	m := gjson.ParseBytes(msg)
	if m.Get("method").Exists() || !m.Get("result").Exists() && !m.Get("error").Exists() {
		return false
	}
	got := m.Get("id")
	if got.Type != id.Type {
		return false
	}
	if got.Type == gjson.String {
		return got.Str == id.Str
	}
	return got.Raw == id.Raw || got.Type == gjson.Number && got.Num == id.Num
}

func (b *bridge) headers(h http.Header) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.session != "" {
		h.Set("Mcp-Session-Id", b.session)
	}
	if b.protocol != "" {
		h.Set("MCP-Protocol-Version", b.protocol)
	}
}

// post sends one message and writes what answers it.
func (b *bridge) post(ctx context.Context, line []byte) {
	id := gjson.GetBytes(line, "id")
	isRequest := id.Exists() && gjson.GetBytes(line, "method").Exists()
	fail := func(msg string) {
		b.log.Warn("stdio: message not answered by the gateway", "err", msg)
		if isRequest {
			b.write(jsonrpc.AppendError(nil, []byte(id.Raw), jsonrpc.CodeInternal, msg))
		}
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, b.url, bytes.NewReader(line))
	if err != nil {
		fail(err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	b.headers(req.Header)
	resp, err := b.client.Do(req)
	if err != nil {
		fail("the gateway did not answer: " + err.Error())
		return
	}
	defer resp.Body.Close()
	initialize := gjson.GetBytes(line, "method").Str == "initialize"
	protocol, answered := b.relay(resp.StatusCode, resp.Header.Get("Content-Type"), resp.Body, id, isRequest, initialize)
	if isRequest && !answered {
		// Nothing readable answered it (an answer withheld, a stream that ended without
		// one, a status without a message): the client is told, never left waiting.
		if resp.StatusCode/100 != 2 {
			fail(fmt.Sprintf("the gateway answered %s", resp.Status))
		} else {
			fail("the gateway's answer to this request could not be read")
		}
	}
	if initialize && resp.StatusCode/100 == 2 {
		b.mu.Lock()
		b.session = resp.Header.Get("Mcp-Session-Id")
		b.protocol = protocol
		b.mu.Unlock()
		if b.session != "" {
			b.openStream(ctx)
		}
	}
}

// relay writes to stdout each JSON-RPC message of the gateway's answer to a message (a
// request when isRequest, whose id is id): one message per line, each checked by message,
// at most one answer to id (the first; a client would take either). It returns the
// negotiated protocol version of an initialize answer, and whether id was answered.
func (b *bridge) relay(status int, contentType string, body io.Reader, id gjson.Result, isRequest, initialize bool) (protocol string, answered bool) {
	emit := func(m []byte) {
		line, ok := message(m)
		if ok && isRequest && answers(line, id) {
			if answered {
				b.log.Warn("stdio: withheld a second answer to one request")
				return
			}
			if v := gjson.GetBytes(line, "result.protocolVersion"); initialize && v.Type == gjson.String {
				protocol = v.Str
			}
			answered = b.write(line)
			return
		}
		b.write(m)
	}
	switch {
	case containsFoldCI(contentType, "text/event-stream"):
		eachEventData(body, emit)
	case containsFoldCI(contentType, "application/json"):
		raw, _ := io.ReadAll(body)
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' && jsonx.Validate(t, admission.MaxDepth) == nil {
			for _, m := range gjson.ParseBytes(t).Array() { // a batch's answers
				emit([]byte(m.Raw))
			}
		} else {
			emit(raw)
		}
	default:
		io.Copy(io.Discard, body)
	}
	return protocol, answered
}

// eachEventData hands emit the data of each SSE event read from r, until r ends: an
// event's data lines joined with "\n", as the SSE spec reads them (a byte order mark at
// the start dropped, as clients drop it). emit decides whether that is one message.
func eachEventData(r io.Reader, emit func([]byte)) {
	rd := bufio.NewReaderSize(r, 64<<10)
	if b, err := rd.Peek(3); err == nil && string(b) == "\xEF\xBB\xBF" {
		rd.Discard(3)
	}
	var buf []byte
	for {
		chunk, err := rd.ReadBytes('\n')
		buf = append(buf, chunk...)
		for {
			ev, rest, ok := sse.Next(buf, err != nil)
			if !ok {
				break
			}
			if data, has := sse.Data(ev); has {
				emit(data)
			}
			buf = append(buf[:0], rest...)
		}
		if err != nil {
			return
		}
	}
}

// openStream opens the session's GET stream: the server's own messages and the gateway's
// notifications that no answer carried.
func (b *bridge) openStream(ctx context.Context) {
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.mu.Lock()
	b.stopGet = stop
	b.mu.Unlock()
	go func() {
		defer stop()
		for attempt := 0; sctx.Err() == nil; attempt++ {
			if attempt > 0 {
				select {
				case <-sctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, b.url, nil)
			req.Header.Set("Accept", "text/event-stream")
			b.headers(req.Header)
			resp, err := b.client.Do(req)
			if err != nil {
				continue
			}
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				if resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotFound {
					return // no stream for this session
				}
				continue
			}
			eachEventData(resp.Body, func(m []byte) { b.write(m) })
			resp.Body.Close()
		}
	}()
}

// endSession ends the session at the gateway (DELETE: its child ends) and its stream.
func (b *bridge) endSession() {
	b.mu.Lock()
	sid, stop := b.session, b.stopGet
	b.session, b.protocol, b.stopGet = "", "", nil
	b.mu.Unlock()
	if stop != nil {
		stop()
	}
	if sid == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, b.url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := b.client.Do(req); err == nil {
		resp.Body.Close()
	}
}

func containsFoldCI(s, sub string) bool {
	return bytes.Contains(bytes.ToLower([]byte(s)), []byte(sub))
}

// memListener is a net.Listener only this process can dial: the stdio gateway has no
// port another local user could reach.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "stdio" }
