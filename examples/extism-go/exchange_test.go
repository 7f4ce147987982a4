package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/internal/testenv"
	"github.com/tetratelabs/wazero"
)

// modulePath is the exchange module, built by `make build.exchange`.
var modulePath = filepath.Join("..", "..", "build", "stategate-exchange.wasm")

func loadModule(t testing.TB) []byte {
	t.Helper()
	testenv.NeedFile(t, modulePath, "run `make build.exchange`")
	b, err := os.ReadFile(modulePath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExchangeSuite runs every case of the exchange suite through this host: the module's
// exchange on the Extism Go SDK, with the bytes the Go gateway gives.
func TestExchangeSuite(t *testing.T) {
	module := loadModule(t)
	cache := wazero.NewCompilationCache()
	exchangetest.Run(t, func(t *testing.T, cfg []byte) exchangetest.Host {
		sh := &suiteHost{}
		up := httptest.NewServer(http.HandlerFunc(sh.answer))
		t.Cleanup(up.Close)
		h, err := New(context.Background(), Options{Module: module, Config: cfg, Upstream: up.URL + "/mcp", Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(context.Background()) })
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		sh.url = srv.URL + "/mcp"
		return sh
	})
}

type suiteHost struct {
	url      string
	mu       sync.Mutex
	step     exchangetest.Step
	called   bool
	received []byte
	session  string
}

func (h *suiteHost) answer(w http.ResponseWriter, r *http.Request) {
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

func (h *suiteHost) Do(t *testing.T, s exchangetest.Step) exchangetest.Got {
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
			req.Header.Add(k, v)
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
