package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/host"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
)

// TestExchangeSuite runs the exchange-level conformance suite through the gateway: a real
// net/http client, the gateway with the built plugin, and an upstream that answers each
// step as the case says.
func TestExchangeSuite(t *testing.T) {
	rt := pluginRuntime(t)
	exchangetest.Run(t, func(t *testing.T, cfg []byte) exchangetest.Host {
		h := &gwHost{}
		up := httptest.NewServer(http.HandlerFunc(h.answer))
		t.Cleanup(up.Close)
		ctx := context.Background()
		pool, err := host.NewPool(ctx, rt, cfg, host.PoolOptions{Size: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close(ctx) })
		u, _ := url.Parse(up.URL + "/mcp")
		gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: cfg, Store: store.NewMemory(store.Options{}),
			Origins: admission.OriginPolicy{Loopback: true}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		h.url = srv.URL + "/mcp"
		return h
	})
}

type gwHost struct {
	url      string
	mu       sync.Mutex
	step     exchangetest.Step
	called   bool
	received []byte
	session  string // the Mcp-Session-Id the upstream was sent
}

func (h *gwHost) answer(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	s := h.step
	h.called, h.received, h.session = true, body, r.Header.Get("Mcp-Session-Id")
	h.mu.Unlock()
	if s.Upstream == nil {
		http.Error(w, "the upstream was not to be called", http.StatusTeapot)
		return
	}
	w.Header().Set("Content-Type", s.Upstream.ContentType)
	if s.Upstream.Session != "" {
		w.Header().Set("Mcp-Session-Id", s.Upstream.Session)
	}
	w.WriteHeader(s.Upstream.Status)
	io.WriteString(w, exchangetest.UpstreamAnswer(s, body))
}

func (h *gwHost) Do(t *testing.T, s exchangetest.Step) exchangetest.Got {
	h.mu.Lock()
	h.step, h.called, h.received, h.session = s, false, nil, ""
	h.mu.Unlock()
	method := s.Method
	if method == "" {
		method = http.MethodPost
	}
	req, _ := http.NewRequest(method, h.url, strings.NewReader(s.Body))
	for k, vs := range s.Headers {
		for _, v := range vs {
			req.Header.Add(k, v) // a repeated header goes as one field line per value
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	return exchangetest.Got{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(body),
		UpstreamCalled: h.called, UpstreamBody: string(h.received),
		Session: resp.Header.Get("Mcp-Session-Id"), UpstreamSession: h.session}
}
