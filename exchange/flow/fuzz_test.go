package flow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/plugin/engine"
)

// FuzzFlow drives one request and its answer through the flow with arbitrary bytes: the
// request's method, headers ("Name: value" lines) and body, the upstream's status, media
// type and body, fed in chunks of a fuzzed size, and the timeout or the client leaving at
// a fuzzed point. Nothing may panic (in the exchange module a panic traps), and an answer
// always ends. Seeded from every step of the exchange suite.
func FuzzFlow(f *testing.F) {
	for _, c := range exchangetest.Cases() {
		for _, s := range c.Steps {
			var hdr strings.Builder
			for k, vs := range s.Headers {
				for _, v := range vs {
					hdr.WriteString(k + ": " + v + "\n")
				}
			}
			status, ct, body := 0, "", ""
			if s.Upstream != nil {
				status, ct, body = s.Upstream.Status, s.Upstream.ContentType, s.Upstream.Body
			}
			f.Add(s.Method, hdr.String(), s.Body, status, ct, body, uint8(7), uint8(0))
		}
	}
	cfg := exchangetest.Config("sample.json")
	e, err := engine.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, headers, body string, status int, ct, answer string, chunk, stop uint8) {
		st := &kvstate.State{KV: kv{}}
		core := exchange.New(exchange.Options{Plugin: engineCalls{e}, State: st, Config: cfg, MaxBodyBytes: 1 << 16,
			NewCache: func(l cache.Limits) cache.Cache { return cache.NewMemory(l, nil) }})
		fl := flow.New(flow.Options{Core: core, Busy: st.TakeBusy, MaxBodyBytes: 1 << 16, Origins: admission.OriginPolicy{Loopback: true}})
		h := flow.Headers{{"Host", "127.0.0.1"}}
		for _, line := range strings.Split(headers, "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok {
				h = append(h, [2]string{k, v})
			}
		}
		if method == "" {
			method = "POST"
		}
		d := fl.Request(context.Background(), flow.Request{Method: method, Path: "/mcp", Headers: h, Body: []byte(body)})
		if d.Open == nil {
			return
		}
		n := max(int(chunk), 1)
		up := flow.Headers{{"Content-Type", ct}}
		for i, step := 0, 0; ; i, step = i+n, step+1 {
			if stop != 0 && step == int(stop%8) {
				if stop&8 != 0 {
					if d.Open.Cancel() {
						return
					}
				} else if out, abandon := d.Open.Timeout(); abandon || !out.End {
					return
				}
			}
			end := min(i+n, len(answer))
			if i > len(answer) {
				t.Fatal("the answer never ended")
			}
			if out := d.Open.Answer(status, up, []byte(answer[min(i, len(answer)):end]), end < len(answer)); out.End {
				return
			}
		}
	})
}

// FuzzFlow_oauth drives a request of a fuzzed method and path (odd well-known paths
// included) through a flow that routes OAuth discovery (its upstream with a path, or
// without one, when the client's suffix goes to the origin), and feeds it an answer of a
// fuzzed status, WWW-Authenticate value and body in chunks: nothing may panic, a path sent
// to the origin is a clean document's, encoded as the gateway sends it, an answer always
// ends, a document or challenge the flow does not rewrite comes back byte for byte, and
// once an output says Pipe (never with End) the chunks fed on come back as they were.
func FuzzFlow_oauth(f *testing.F) {
	for _, s := range []struct{ method, path, challenge, body string }{
		{"GET", "/.well-known/oauth-protected-resource/mcp", `Bearer resource_metadata="http://up/.well-known/oauth-protected-resource/mcp"`, `{"resource":"http://up/mcp"}`},
		{"GET", "/.well-known/oauth-protected-resource", "", `{"resource":"http://up"}`},
		{"GET", "/.well-known/oauth-protected-resource//%2e%2e/?q#f", `Bearer realm="a", resource_metadata=x`, `{"resource":"http://[::1`},
		{"HEAD", "/.well-known/openid-configuration/", `Bearer resource_metadata="`, `{"issuer":"x"}`},
		{"POST", "/mcp", `Bearer error="invalid_token", resource_metadata="https://up:1/.well-known/oauth-protected-resource/mcp?x#y"`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"GET", "/.well-known/oauth-protected-resource/mcp", "", `{"resource":"http://up/mcp","resource":1}`},
		{"GET", "/.well-known/oauth-protected-resource/mcp", "", strings.Repeat("[", 5000)},
		{"GET", "/.well-known/oauth-authorization-server/..%2f..%2fadmin", "", `{}`},
		{"GET", "/.well-known/openid-configuration/a\\..\\b?x=1", "", `{}`},
		{"GET", "/.well-known/oauth-protected-resource/team%20a/m%3Fcp", "", `{"resource":"http://up/mcp"}`},
	} {
		f.Add(s.method, s.path, s.challenge, s.body, 200, uint8(3))
		f.Add(s.method, s.path, s.challenge, s.body, 401, uint8(64))
	}
	withPath, _ := oauthFlow(f, &oauth.Map{Public: "https://gw.example", EndpointPath: "/mcp"}, 1<<12)
	keepPath, _ := oauthFlow(f, &oauth.Map{Public: "https://gw.example"}, 1<<12) // the client's suffix goes upstream
	f.Fuzz(func(t *testing.T, method, path, challenge, body string, status int, chunk uint8) {
		fl := withPath
		if chunk%2 == 1 {
			fl = keepPath
		}
		h := flow.Headers{{"Host", "127.0.0.1"}, {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}}
		d := fl.Request(context.Background(), flow.Request{Method: method, Path: path, Headers: h, Body: []byte(body)})
		if d.Origin {
			p, _, _ := strings.Cut(d.Path, "?")
			if _, ok, err := oauth.RequestDiscovery(p); !ok || err != nil || p != oauth.EscapePath(oauth.DecodePath(p)) {
				t.Fatalf("a %s of %q goes to the origin at %q: not a clean document path", method, path, d.Path)
			}
		}
		if d.Open == nil {
			return
		}
		n := max(int(chunk), 1)
		up := flow.Headers{{"Content-Type", "application/json"}, {"WWW-Authenticate", challenge}}
		var out []byte
		var first flow.Output
		piped := false
		for i := 0; ; i += n {
			if i > len(body) {
				t.Fatal("the answer never ended")
			}
			end := min(i+n, len(body))
			o := d.Open.Answer(status, up, []byte(body[i:end]), end < len(body))
			if o.Start {
				first = o
			}
			if piped && (o.Start || string(o.Body) != body[i:end]) {
				t.Fatalf("fed on after Pipe: start %v, %.80q; want the chunk %.80q as it came", o.Start, o.Body, body[i:end])
			}
			if o.Pipe && o.End {
				t.Fatalf("Pipe with End (a %s %q answered %d)", method, path, status)
			}
			piped = piped || o.Pipe
			out = append(out, o.Body...)
			if o.End {
				break
			}
		}
		if d.Origin && first.Start && first.Headers.Get("WWW-Authenticate") != challenge {
			t.Fatalf("a discovery document's challenge changed: %q", first.Headers.Get("WWW-Authenticate"))
		}
		if d.Origin && first.Status != 200 && string(out) != body {
			t.Fatalf("a %d document changed: %q", first.Status, out)
		}
	})
}
