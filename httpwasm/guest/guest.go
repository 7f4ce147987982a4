// Package guest is the http-wasm build of the MCP exchange (httpwasm/): the exchange core
// and its HTTP level (exchange/, exchange/flow) behind http-wasm's two calls, so that the
// host (Traefik's and Dapr's http-wasm middleware) only does the I/O. It is written against
// http-wasm-guest-tinygo's api interfaces only, so plain `go test` runs it with fakes; the
// command (httpwasm/main.go) connects it to the host's imports.
//
// # Notes
//
//   - handle_request reads the client's request whole and asks the flow: an answer is
//     written at once (next=false); a forward rewrites the request in place and returns
//     next=true. An answer the flow reads (an admitted call's, a DELETE's, an OAuth
//     document's or challenge's) is buffered by the host (FeatureBufferResponse, for that
//     request only) and handed back in handle_response, where the flow rewrites it whole.
//     A GET for an event stream (a session's standing stream) is never held: it passes.
//   - A lease another call holds is a Wait decision: the guest sleeps and asks again, up
//     to leaseWaitMs, in the same handle_request (the host's other requests run in other
//     guest instances meanwhile).
//   - One guest instance serves one request at a time (the host pools instances), so one
//     open exchange is kept, matched by its reqCtx.
//   - Nothing here panics on input: every value read from the host is checked, and a
//     failure is an HTTP answer or a log line, never a trap.
package guest

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/http-wasm/http-wasm-guest-tinygo/handler/api"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// Host is what the guest needs of the http-wasm host beyond a request and a response.
type Host interface {
	EnableFeatures(api.Features) api.Features
	Log(api.LogLevel, string)
}

// Guest is one guest instance's exchange.
type Guest struct {
	host  Host
	opts  Options
	eng   *engine.Engine
	core  *exchange.Core
	flw   *flow.Flow
	state *kvstate.State

	open   *flow.Open // the forwarded exchange whose answer comes to handle_response
	openID uint32
	nextID uint32

	Sleep func(time.Duration) // how a Wait decision waits (nil: Pause)
	rep   *reporter
}

// Load builds the exchange from the configuration document (the stategate configuration
// document, with this build's options under OptionsMember). kv is the state when the
// options name no state directory; newDir opens the state directory they name. An error
// is the reason the build cannot honour the document: the host must refuse to load.
func Load(doc []byte, host Host, kv kvstate.KV, newDir func(path string) (kvstate.KV, error)) (*Guest, error) {
	doc = bytes.TrimSpace(doc)
	if !gjson.ValidBytes(doc) || !gjson.ParseBytes(doc).IsObject() {
		return nil, errors.New("stategate: the plugin configuration is not a JSON object (it is the stategate configuration document)")
	}
	opts, err := ParseOptions(gjson.GetBytes(doc, OptionsMember))
	if err != nil {
		return nil, errors.New("stategate: " + err.Error())
	}
	cfg := doc
	if gjson.GetBytes(doc, OptionsMember).Exists() {
		cfg = without(doc, OptionsMember)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		cfg = restoreScalars(cfg) // a host that hands options over as strings (Traefik)
		eng, err = engine.New(cfg)
	}
	if err != nil {
		return nil, errors.New("stategate: configuration refused: " + configProblems(cfg, err))
	}
	if opts.StateDir == "" {
		if need := sharedState(eng.HostFacts(), gjson.GetBytes(cfg, "stateSync.fromAnnotations").Type == gjson.True); need != "" {
			return nil, errors.New("stategate: " + need + " need state shared by every guest instance, and this build keeps it only in a state directory: " +
				"set " + OptionsMember + ".stateDir to a directory mounted into the guest (Traefik: the plugin's settings.mounts), or remove them")
		}
	} else {
		if kv, err = newDir(opts.StateDir); err != nil {
			return nil, errors.New("stategate: " + OptionsMember + ".stateDir: " + err.Error())
		}
	}
	oauth, err := oauthMap(opts)
	if err != nil {
		return nil, errors.New("stategate: " + err.Error())
	}
	g := &Guest{host: host, opts: opts, eng: eng, state: &kvstate.State{KV: kv}}
	rep := &reporter{host: host}
	g.rep = rep
	wait := time.Duration(opts.LeaseWaitMs) * time.Millisecond
	g.core = exchange.New(exchange.Options{Plugin: inProcess{eng}, State: g.state, Reporter: rep, Config: cfg,
		MaxBodyBytes: opts.MaxBodyBytes, LeaseWait: wait,
		NewCache: func(l cache.Limits) cache.Cache { return cache.NewMemory(l, nil) }})
	g.flw = flow.New(flow.Options{Core: g.core, MaxBodyBytes: opts.MaxBodyBytes, LeaseWait: wait,
		Origins: admission.OriginPolicy{AllowedOrigins: opts.AllowedOrigins, AllowedHosts: opts.AllowedHosts, Loopback: opts.Loopback},
		Busy:    g.state.TakeBusy, OAuth: oauth})
	return g, nil
}

// oauthMap is the flow's OAuth option from publicUrl and upstream (nil without upstream:
// discovery documents pass as any request).
func oauthMap(o Options) (*oauth.Map, error) {
	if o.Upstream == "" {
		if o.PublicURL != "" {
			return nil, errors.New(OptionsMember + ".publicUrl: needs " + OptionsMember + ".upstream (the MCP server's URL)")
		}
		return nil, nil
	}
	m := &oauth.Map{}
	if o.PublicURL != "" {
		p, err := oauth.ParsePublicURL(o.PublicURL)
		if err != nil {
			return nil, errors.New(OptionsMember + ".publicUrl: must be an http(s) origin (scheme://host[:port])")
		}
		m.Public = p
	}
	u, err := url.Parse(o.Upstream)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, errors.New(OptionsMember + ".upstream: must be the MCP server's absolute URL")
	}
	m.EndpointPath = u.Path
	return m, nil
}

// without is the object doc without its members named name (the others as they are, in
// order; a repeated name stays repeated, for the engine to refuse). Not sjson: its writer
// links encoding/json into the module (RATIONALE.md, "sjson out of the module").
func without(doc []byte, name string) []byte {
	out := append(make([]byte, 0, len(doc)), '{')
	gjson.ParseBytes(doc).ForEach(func(k, v gjson.Result) bool {
		if k.String() == name {
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, k.Raw...)
		out = append(out, ':')
		out = append(out, v.Raw...)
		return true
	})
	return append(out, '}')
}

// Options returns the options the guest was loaded with.
func (g *Guest) Options() Options { return g.opts }

// configProblems names what the engine refused in the document.
func configProblems(cfg []byte, err error) string {
	var msgs []string
	gjson.GetBytes(engine.CheckConfig(cfg), "errors").ForEach(func(_, v gjson.Result) bool {
		msgs = append(msgs, v.String())
		return true
	})
	if len(msgs) == 0 {
		return err.Error()
	}
	return strings.Join(msgs, "; ")
}

// sharedState names what in the configuration needs state every guest instance shares
// ("" when nothing does).
func sharedState(f engine.HostFacts, fromAnnotations bool) string {
	var need []string
	if fromAnnotations {
		// The listed tools' annotations are recorded in State by tools/list and read by the
		// calls: a call in another instance would lose its invalidation block.
		need = append(need, "stateSync.fromAnnotations (the listed annotations)")
	}
	if len(f.Tools) > 0 {
		need = append(need, "workflows (their tools are gated and moved)")
	}
	if f.Health != nil {
		need = append(need, "tool health")
	}
	if f.Cache != nil {
		need = append(need, "the response cache (its invalidations)")
	}
	return strings.Join(need, ", ")
}

// inProcess is the engine called directly.
type inProcess struct{ eng *engine.Engine }

func (p inProcess) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	return p.eng.AppendCall(nil, fn, in), nil
}

// HandleRequest is http-wasm's handle_request.
func (g *Guest) HandleRequest(req api.Request, resp api.Response) (next bool, reqCtx uint32) {
	g.open = nil
	method, path := req.GetMethod(), req.GetURI()
	h := requestHeaders(req.Headers())
	body, tooLarge := readBody(req.Body(), g.opts.MaxBodyBytes)
	r := flow.Request{Method: method, Path: path, Headers: h, Body: body}
	if tooLarge {
		r.Body = body[:g.opts.MaxBodyBytes+1] // the flow refuses it, as any host's
	}
	ctx := context.Background()
	d := g.flw.Request(ctx, r)
	for d.Do == flow.DoWait {
		g.rep.pending = g.rep.pending[:0] // the refusal is not final: nothing to report yet
		step := time.Duration(max(d.AfterMs, 1)) * time.Millisecond
		g.sleep(step)
		r.Waited += step
		d = g.flw.Request(ctx, r)
	}
	g.rep.flush()
	switch d.Do {
	case flow.DoAnswer:
		writeAnswer(resp, d.Status, d.Headers, d.Body)
		return false, 0
	case flow.DoStream:
		// A gateway session's standing stream: http-wasm hands the guest no stream to
		// write to later, so none is offered (the MCP answer of a server without one).
		writeAnswer(resp, 405, flow.Headers{{"Allow", "POST, DELETE"}, {"Content-Type", "text/plain; charset=utf-8"}},
			[]byte("Method Not Allowed: this gateway offers no standing event stream\n"))
		return false, 0
	case flow.DoForward:
	default:
		writeAnswer(resp, 500, flow.Headers{{"Content-Type", "text/plain; charset=utf-8"}}, []byte("stategate: unknown decision\n"))
		return false, 0
	}
	if len(d.Body) != len(body) && len(body) > 0 {
		// The host's request keeps its Content-Length (http-wasm sets the body, not the
		// length): a body of another length could not be sent. The core keeps lengths.
		writeAnswer(resp, 500, flow.Headers{{"Content-Type", "text/plain; charset=utf-8"}}, []byte("stategate: the request body changed length\n"))
		return false, 0
	}
	if !strings.EqualFold(d.Method, method) {
		req.SetMethod(d.Method)
	}
	if d.Path != path && d.Path != "" {
		req.SetURI(d.Path)
	}
	setHeaders(req.Headers(), d.Headers)
	if len(d.Body) > 0 {
		req.Body().Write(d.Body) // the read consumed the body: it is written back
	}
	o := d.Open
	if o == nil || o.Exchange() == nil && strings.EqualFold(method, "GET") && strings.Contains(strings.ToLower(h.Get("Accept")), "text/event-stream") {
		return true, 0 // the answer passes as it comes: a standing stream is never held
	}
	if g.host.EnableFeatures(api.FeatureBufferResponse)&api.FeatureBufferResponse == 0 {
		g.host.Log(api.LogLevelError, "stategate: the host cannot buffer answers: this call's answer passes unread")
		o.Cancel()
		return true, 0
	}
	g.nextID++
	if g.nextID == 0 {
		g.nextID = 1
	}
	g.open, g.openID = o, g.nextID
	return true, g.openID
}

// HandleResponse is http-wasm's handle_response: the buffered answer of the exchange
// HandleRequest opened, read whole and rewritten.
func (g *Guest) HandleResponse(reqCtx uint32, _ api.Request, resp api.Response, isError bool) {
	o := g.open
	if o == nil || reqCtx == 0 || reqCtx != g.openID {
		return
	}
	g.open = nil
	var out flow.Output
	defer g.rep.flush()
	if isError {
		out = o.Fail("unreachable")
	} else {
		status := resp.GetStatusCode()
		if status > 999 {
			status = 502
		}
		h := responseHeaders(resp.Headers())
		body, _ := readBody(resp.Body(), 1<<30)
		out = o.Answer(int(status), h, body, false)
	}
	if out.Start {
		setHeaders(resp.Headers(), out.Headers)
	}
	resp.Headers().Set("Content-Length", strconv.Itoa(len(out.Body)))
	if out.Start {
		resp.SetStatusCode(uint32(out.Status))
	}
	resp.Body().Write(out.Body)
}

func (g *Guest) sleep(d time.Duration) {
	if g.Sleep != nil {
		g.Sleep(d)
		return
	}
	Pause(d)
}

// Pause waits d by the wall clock. A host may give its guests a sleep that returns at once
// and a monotonic clock that is not time (Traefik keeps wazero's defaults for both, and
// gives the real wall clock only): the wait is then a spin on the wall clock.
func Pause(d time.Duration) {
	end := time.Now().UnixNano() + int64(d)
	for time.Now().UnixNano() < end {
		time.Sleep(d)
	}
}

// requestHeaders reads every field of h (Host included: the host reports it as a field).
func requestHeaders(h api.Header) flow.Headers {
	var out flow.Headers
	for _, n := range h.Names() {
		for _, v := range h.GetAll(n) {
			out = append(out, [2]string{n, v})
		}
	}
	return out
}

func responseHeaders(h api.Header) flow.Headers { return requestHeaders(h) }

// setHeaders makes h hold exactly want's fields (Host aside: it is the request's own).
func setHeaders(h api.Header, want flow.Headers) {
	for _, n := range h.Names() {
		if !strings.EqualFold(n, "Host") && !want.Has(n) {
			h.Remove(n)
		}
	}
	done := map[string]bool{}
	for _, f := range want {
		if strings.EqualFold(f[0], "Host") {
			continue
		}
		key := strings.ToLower(f[0])
		if done[key] {
			continue
		}
		done[key] = true
		vs := want.Values(f[0])
		h.Set(f[0], vs[0])
		for _, v := range vs[1:] {
			h.Add(f[0], v)
		}
	}
}

// writeAnswer writes an answer the guest makes itself: headers first, since a host that
// does not buffer the answer sends them with the status (http-wasm-host-go's WriteHeader).
func writeAnswer(resp api.Response, status int, h flow.Headers, body []byte) {
	setHeaders(resp.Headers(), h)
	resp.Headers().Set("Content-Length", strconv.Itoa(len(body)))
	resp.SetStatusCode(uint32(status))
	if len(body) > 0 {
		resp.Body().Write(body)
	}
}

// readBody reads b whole, up to limit+1 bytes (tooLarge: there was more than limit).
func readBody(b api.Body, limit int) (body []byte, tooLarge bool) {
	buf := make([]byte, 32<<10)
	for {
		n, eof := b.Read(buf)
		if int(n) > len(buf) {
			n = uint32(len(buf))
		}
		body = append(body, buf[:n]...)
		if len(body) > limit {
			return body, true
		}
		if eof || n == 0 {
			return body, false
		}
	}
}

// reporter logs the core's faults through the host, once a request's decision is final.
type reporter struct {
	host    Host
	pending []string
}

func (r *reporter) flush() {
	for _, m := range r.pending {
		r.host.Log(api.LogLevelWarn, m)
	}
	r.pending = r.pending[:0]
}

func (r *reporter) Fault(f abi.Fault, p abi.Policy, err error, attrs ...any) {
	msg := "stategate: fault " + f.String() + " (" + p.String() + ")"
	if err != nil {
		msg += ": " + err.Error()
	}
	for i := 0; i+1 < len(attrs); i += 2 {
		k, _ := attrs[i].(string)
		switch v := attrs[i+1].(type) {
		case string:
			msg += " " + k + "=" + v
		case int:
			msg += " " + k + "=" + strconv.Itoa(v)
		}
	}
	if len(r.pending) < 64 {
		r.pending = append(r.pending, msg)
	}
}

func (*reporter) Count(stats.Counter) {}
