package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/host/demo"
	"github.com/tidwall/gjson"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a real OTLP/HTTP trace receiver: it decodes each protobuf
// ExportTraceServiceRequest posted to /v1/traces and keeps the spans.
type otlpReceiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				o.services = append(o.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (o *otlpReceiver) find(name string) *tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// headerTransport adds a header to every request (the client's traceparent).
type headerTransport struct{ k, v string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.k, h.v)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServe_traces: with OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME set, serve
// exports a server span per MCP request to a real OTLP/HTTP receiver, named and
// attributed per the MCP semantic conventions (the session as a digest, the refusal code
// as error.type), in the client's trace (traceparent), with engine, store and upstream
// child spans; the upstream gets the gateway's traceparent.
func TestServe_traces(t *testing.T) {
	rec := &otlpReceiver{}
	collector := httptest.NewServer(rec)
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "sg-trace-test")
	var upMu sync.Mutex
	var upParents, upMeta []string
	up := demo.Handler(demo.Options{})
	s := startServeIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		upMu.Lock()
		if tp := r.Header.Get("traceparent"); tp != "" {
			upParents = append(upParents, tp)
		}
		if tp := gjson.GetBytes(body, "params._meta.traceparent").Str; tp != "" {
			upMeta = append(upMeta, tp)
		}
		upMu.Unlock()
		up.ServeHTTP(w, r)
	}))
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "trace-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: s.mcpURL, HTTPClient: &http.Client{Transport: headerTransport{"traceparent", "00-" + traceID + "-" + parent + "-01"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	mustCall(t, cs, "cart.pay", nil) // denied
	mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"})
	waitFor(t, "the spans are exported", func() bool {
		return rec.find("tools/call cart.add_item") != nil && rec.find("tools/call cart.pay") != nil && rec.find("upstream tools/call") != nil
	})
	call := rec.find("tools/call cart.add_item")
	if hex.EncodeToString(call.TraceId) != traceID || hex.EncodeToString(call.ParentSpanId) != parent || call.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("server span not in the client's trace: trace %x parent %x kind %v", call.TraceId, call.ParentSpanId, call.Kind)
	}
	if attr(call, "mcp.method.name") != "tools/call" || attr(call, "gen_ai.tool.name") != "cart.add_item" ||
		attr(call, "mcp.session.id") != events.SessionDigest(cs.ID()) || attr(call, "jsonrpc.request.id") == "" || attr(call, "error.type") != "" {
		t.Fatalf("server span attributes: %v", call.Attributes)
	}
	if denied := rec.find("tools/call cart.pay"); attr(denied, "error.type") != "TOOL_NOT_AVAILABLE" {
		t.Fatalf("denied call's error.type: %v", denied.Attributes)
	}
	upSpan := rec.find("upstream tools/call")
	// cart.add_item's success transition is answered by check_limits at admission (no guard
	// reads its result), so its engine span is check_limits alone: no transition call.
	for _, name := range []string{"stategate.engine check_limits", "upstream tools/call"} {
		waitFor(t, name, func() bool { return rec.find(name) != nil })
	}
	rec.mu.Lock()
	children := 0
	for _, sp := range rec.spans {
		if string(sp.TraceId) == string(call.TraceId) && string(sp.ParentSpanId) == string(call.SpanId) {
			children++
		}
		if strings.HasPrefix(sp.Name, "stategate.store") && string(sp.TraceId) == string(call.TraceId) {
			children += 100
		}
	}
	services := rec.services
	rec.mu.Unlock()
	if children < 102 { // engine and upstream spans under the call, store spans in its trace
		t.Fatalf("child spans of the call: %d", children)
	}
	if len(services) == 0 || services[0] != "sg-trace-test" {
		t.Fatalf("service.name %v", services)
	}
	upMu.Lock()
	want := "00-" + traceID + "-" + hex.EncodeToString(upSpan.SpanId) + "-01"
	found := false
	for _, p := range upParents {
		found = found || p == want
	}
	upMu.Unlock()
	if !found {
		t.Fatalf("the upstream got traceparent %v, want %s among them", upParents, want)
	}

	// A client that puts the trace context in params._meta (no header): the call joins
	// that trace, and the upstream gets the gateway's span there too.
	const metaTrace, metaParent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	cs2 := mcpClient(t, s.mcpURL)
	if _, err := cs2.CallTool(ctx, &mcp.CallToolParams{Name: "cart.add_item", Arguments: map[string]any{"sku": "mug"},
		Meta: mcp.Meta{"traceparent": "00-" + metaTrace + "-" + metaParent + "-01"}}); err != nil {
		t.Fatal(err)
	}
	var metaCall *tracepb.Span
	waitFor(t, "the _meta call's spans", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, sp := range rec.spans {
			if hex.EncodeToString(sp.TraceId) == metaTrace && sp.Name == "tools/call cart.add_item" {
				metaCall = sp
			}
		}
		return metaCall != nil
	})
	if hex.EncodeToString(metaCall.ParentSpanId) != metaParent {
		t.Fatalf("_meta call's parent %x", metaCall.ParentSpanId)
	}
	upMu.Lock()
	defer upMu.Unlock()
	if len(upMeta) != 1 || !strings.HasPrefix(upMeta[0], "00-"+metaTrace+"-") || strings.Contains(upMeta[0], metaParent) {
		t.Fatalf("the upstream's params._meta.traceparent %v: want the gateway's span in trace %s", upMeta, metaTrace)
	}
}

// TestServe_tracesNeverHoldTrafficUp: with the collector unreachable, calls go through
// at their usual pace (spans are dropped, export failures are logged).
func TestServe_tracesNeverHoldTrafficUp(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", dead.URL)
	s := startServe(t, demo.Options{})
	cs := mcpClient(t, s.mcpURL)
	start := time.Now()
	for i := 0; i < 50; i++ {
		mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"})
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("50 calls took %v with the collector down", d)
	}
}
