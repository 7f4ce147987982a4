package flow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/host/respcache"
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
			NewCache: func(l exchange.CacheLimits) exchange.Cache { return respcache.New(l, nil) }})
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
