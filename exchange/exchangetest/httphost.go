package exchangetest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// HTTPHost is a Host for a gateway reached over HTTP, in front of an upstream of its own
// that answers each step as the case says and records what it was sent. Every HTTP host
// (the Go gateway, the Extism hosts) runs the suite through it.
type HTTPHost struct {
	// URL is the gateway's MCP endpoint; set it once the gateway listens.
	URL string

	mu       sync.Mutex
	step     Step
	called   bool
	received []byte
	session  string // the Mcp-Session-Id the upstream was sent
	path     string // the path and query the upstream was sent
}

// NewHTTPHost starts the upstream (closed when t ends) and returns the host with the URL
// the gateway must forward to.
func NewHTTPHost(t *testing.T) (h *HTTPHost, upstream string) {
	h = &HTTPHost{}
	up := httptest.NewServer(http.HandlerFunc(h.answer))
	t.Cleanup(up.Close)
	return h, up.URL + "/mcp"
}

// answer is the upstream: the current step's answer, or 418 when the step says the
// upstream is not to be called.
func (h *HTTPHost) answer(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	s := h.step
	h.called, h.received, h.session, h.path = true, body, r.Header.Get("Mcp-Session-Id"), r.URL.RequestURI()
	h.mu.Unlock()
	if s.Upstream == nil {
		http.Error(w, "the upstream was not to be called", http.StatusTeapot)
		return
	}
	w.Header().Set("Content-Type", s.Upstream.ContentType)
	if s.Upstream.Session != "" {
		w.Header().Set("Mcp-Session-Id", s.Upstream.Session)
	}
	for k, vs := range s.Upstream.Headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(s.Upstream.Status)
	_, _ = io.WriteString(w, UpstreamAnswer(s, body))
}

// Do sends the step's request to URL (its origin, at the step's path) and reports what the
// client and the upstream got.
func (h *HTTPHost) Do(t *testing.T, s Step) Got {
	h.mu.Lock()
	h.step, h.called, h.received, h.session, h.path = s, false, nil, "", ""
	h.mu.Unlock()
	method := s.Method
	if method == "" {
		method = http.MethodPost
	}
	target := h.URL
	if s.Path != "" {
		u, err := url.Parse(h.URL)
		if err != nil {
			t.Fatal(err)
		}
		target = u.Scheme + "://" + u.Host + s.Path
	}
	req, _ := http.NewRequest(method, target, strings.NewReader(s.Body))
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
	var hdr [][2]string
	for k, vs := range resp.Header {
		for _, v := range vs {
			hdr = append(hdr, [2]string{k, v})
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return Got{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(body),
		UpstreamCalled: h.called, UpstreamBody: string(h.received),
		Session: resp.Header.Get("Mcp-Session-Id"), UpstreamSession: h.session, UpstreamPath: h.path, Headers: hdr}
}
