package flow_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/plugin/engine"
)

// engineCalls is the engine called in process, as the exchange module calls it.
type engineCalls struct{ e *engine.Engine }

func (p engineCalls) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	return p.e.AppendCall(nil, fn, in), nil
}

type kv map[string][]byte

func (m kv) Get(keys []string) ([]kvstate.Value, error) {
	out := make([]kvstate.Value, len(keys))
	for i, k := range keys {
		v, ok := m[k]
		out[i] = kvstate.Value{B: v, Ok: ok}
	}
	return out, nil
}

func (m kv) CAS(_, key string, prev, next kvstate.Value) (bool, error) {
	cur, ok := m[key]
	if ok != prev.Ok || ok && string(cur) != string(prev.B) {
		return false, nil
	}
	if next.Ok {
		m[key] = append([]byte(nil), next.B...)
	} else {
		delete(m, key)
	}
	return true, nil
}

// TestExchangeSuite runs the exchange suite through the flow natively, as the exchange
// module runs it (the engine in process, the state over a map with compare-and-set, the
// answer fed in small chunks): the module's logic under plain `go test`.
func TestExchangeSuite(t *testing.T) {
	exchangetest.RunOptions(t, func(t *testing.T, cfg []byte, o exchangetest.HostOptions) exchangetest.Host {
		e, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		st := &kvstate.State{KV: kv{}}
		core := exchange.New(exchange.Options{Plugin: engineCalls{e}, State: st, Config: cfg,
			NewCache: func(l cache.Limits) cache.Cache { return cache.NewMemory(l, nil) }})
		return &host{f: flow.New(flow.Options{Core: core, Busy: st.TakeBusy, Origins: admission.OriginPolicy{Loopback: true},
			OAuth: &oauth.Map{Public: o.PublicURL, EndpointPath: "/mcp"}})} // as the module, its upstream at /mcp
	})
}

type host struct{ f *flow.Flow }

func (h *host) Do(t *testing.T, s exchangetest.Step) exchangetest.Got {
	method := s.Method
	if method == "" {
		method = "POST"
	}
	hdr := flow.Headers{{"Host", "127.0.0.1"}}
	names := make([]string, 0, len(s.Headers))
	for k := range s.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range s.Headers[k] {
			hdr = append(hdr, [2]string{k, v})
		}
	}
	req := flow.Request{Method: method, Path: exchangetest.StepPath(s), Headers: hdr, Body: []byte(s.Body)}
	d := h.f.Request(context.Background(), req)
	if d.Do != flow.DoForward {
		if d.Do != flow.DoAnswer {
			t.Fatalf("decision %q", d.Do)
		}
		return exchangetest.Got{Status: d.Status, ContentType: d.Headers.Get("Content-Type"), Body: string(d.Body),
			Session: d.Headers.Get("Mcp-Session-Id"), Headers: d.Headers}
	}
	got := exchangetest.Got{UpstreamCalled: true, UpstreamBody: string(d.Body), UpstreamSession: d.Headers.Get("Mcp-Session-Id")}
	got.UpstreamPath = d.Path // the upstream's MCP endpoint is /mcp: the host maps a client's path onto it
	if !d.Origin {
		_, query, ok := strings.Cut(d.Path, "?")
		if got.UpstreamPath = "/mcp"; ok {
			got.UpstreamPath += "?" + query
		}
	}
	status, ct, body := 418, "text/plain; charset=utf-8", "the upstream was not to be called\n"
	up := flow.Headers{}
	if a := s.Upstream; a != nil {
		status, ct, body = a.Status, a.ContentType, exchangetest.UpstreamAnswer(s, d.Body)
		if a.Session != "" {
			up = append(up, [2]string{"Mcp-Session-Id", a.Session})
		}
	}
	up = append(up, [2]string{"Content-Type", ct})
	if a := s.Upstream; a != nil {
		for k, vs := range a.Headers {
			for _, v := range vs {
				up = append(up, [2]string{k, v})
			}
		}
	}
	if d.Open == nil { // passed through unchanged
		got.Status, got.ContentType, got.Body, got.Session, got.Headers = status, ct, body, up.Get("Mcp-Session-Id"), up
		return got
	}
	var out strings.Builder
	for i := 0; ; i += 7 {
		end := min(i+7, len(body))
		o := d.Open.Answer(status, up, []byte(body[i:end]), end < len(body))
		if o.Start {
			got.Status, got.ContentType, got.Session, got.Headers = o.Status, o.Headers.Get("Content-Type"), o.Headers.Get("Mcp-Session-Id"), o.Headers
		}
		out.Write(o.Body)
		if o.End {
			break
		}
	}
	got.Body = out.String()
	return got
}
