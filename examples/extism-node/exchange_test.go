package extismnode

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// TestExchangeSuite runs every case of the project's exchange conformance suite
// (exchange/exchangetest/cases), none left out, through gateway.mjs: a real net/http client,
// the Node host with the exchange module under @extism/extism, and an upstream in Go that
// answers each step as the case says. Each step must give the decision and the exact bytes
// the Go gateway gives (durations normalised by the suite, as for every host).
func TestExchangeSuite(t *testing.T) {
	needNode(t)
	exchangetest.Run(t, func(t *testing.T, cfg []byte) exchangetest.Host {
		h := &nodeHost{}
		up := httptest.NewServer(http.HandlerFunc(h.answer))
		t.Cleanup(up.Close)
		h.url = startGateway(t, up.URL+"/mcp", cfg)
		return h
	})
}

// nodeHost is one gateway.mjs in front of an upstream that answers the current step.
type nodeHost struct {
	url      string
	mu       sync.Mutex
	step     exchangetest.Step
	called   bool
	received []byte
	session  string // the Mcp-Session-Id the upstream was sent
}

func (h *nodeHost) answer(w http.ResponseWriter, r *http.Request) {
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
	_, _ = io.WriteString(w, exchangetest.UpstreamAnswer(s, body))
}

func (h *nodeHost) Do(t *testing.T, s exchangetest.Step) exchangetest.Got {
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
