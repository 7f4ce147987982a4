package serve

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// stubSpan is a span with every member the exporter writes set.
func stubSpan(name string, scope string) sdktrace.ReadOnlySpan {
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ts, _ := trace.ParseTraceState("vendor=x")
	start := time.Unix(1700000000, 123)
	return tracetest.SpanStub{
		Name: name,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1, 1, 1, 1, 1, 1, 1, 1},
			TraceFlags: trace.FlagsSampled, TraceState: ts}),
		Parent:    trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{2, 2, 2, 2, 2, 2, 2, 2}, Remote: true}),
		SpanKind:  trace.SpanKindClient,
		StartTime: start, EndTime: start.Add(time.Millisecond),
		Attributes: []attribute.KeyValue{
			attribute.String("s", "é\x00"), attribute.String("empty", ""), attribute.Int64("i", -7), attribute.Bool("b", true),
			attribute.Float64("f", 1.5), attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}),
		},
		DroppedAttributes: 3,
		Events:            []sdktrace.Event{{Name: "ev", Time: start.Add(time.Microsecond), Attributes: []attribute.KeyValue{attribute.Int("n", 1)}}},
		Links: []sdktrace.Link{{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{3, 3, 3, 3, 3, 3, 3, 3}}),
			Attributes: []attribute.KeyValue{attribute.String("l", "v")}}},
		Status:               sdktrace.Status{Code: codes.Error, Description: "boom"},
		Resource:             resource.NewSchemaless(attribute.String("service.name", "svc")),
		InstrumentationScope: instrumentation.Scope{Name: scope, Version: "1"},
	}.Snapshot()
}

// TestAppendExportRequest_decodesWithTheOTLPTypes: what the exporter writes is a valid
// ExportTraceServiceRequest, read back with the OTLP project's generated types, every
// member as the span had it.
func TestAppendExportRequest_decodesWithTheOTLPTypes(t *testing.T) {
	body := appendExportRequest(nil, []sdktrace.ReadOnlySpan{stubSpan("a", "s1"), stubSpan("b", "s2"), stubSpan("c", "s1")})
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 2 {
		t.Fatalf("grouping: %v", &req)
	}
	rs := req.ResourceSpans[0]
	if a := rs.Resource.Attributes; len(a) != 1 || a[0].Key != "service.name" || a[0].Value.GetStringValue() != "svc" {
		t.Fatalf("resource: %v", rs.Resource)
	}
	s1 := rs.ScopeSpans[0]
	if s1.Scope.Name != "s1" || s1.Scope.Version != "1" || len(s1.Spans) != 2 || s1.Spans[1].Name != "c" {
		t.Fatalf("scope s1: %v", s1)
	}
	s := s1.Spans[0]
	want := &tracepb.Span{
		TraceId: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanId: []byte{1, 1, 1, 1, 1, 1, 1, 1},
		TraceState: "vendor=x", ParentSpanId: []byte{2, 2, 2, 2, 2, 2, 2, 2}, Name: "a", Kind: tracepb.Span_SPAN_KIND_CLIENT,
		StartTimeUnixNano: 1700000000000000123, EndTimeUnixNano: 1700000000001000123, DroppedAttributesCount: 3,
		Flags:  0x1 | 0x100 | 0x200,
		Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"},
	}
	got := proto.Clone(s).(*tracepb.Span)
	got.Attributes, got.Events, got.Links = nil, nil, nil
	if !proto.Equal(got, want) {
		t.Fatalf("span:\n got %v\nwant %v", got, want)
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		attrs[a.Key] = a.Value.String()
	}
	for k, v := range map[string]string{"s": `string_value:"é\x00"`, "empty": `string_value:""`, "i": "int_value:-7", "b": "bool_value:true",
		"f": "double_value:1.5", "ss": `array_value:{values:{string_value:"a"} values:{string_value:"b"}}`,
		"is": "array_value:{values:{int_value:1} values:{int_value:2}}"} {
		if strings.Join(strings.Fields(attrs[k]), " ") != v {
			t.Errorf("attribute %s = %s, want %s", k, attrs[k], v)
		}
	}
	if len(s.Events) != 1 || s.Events[0].Name != "ev" || s.Events[0].TimeUnixNano != 1700000000000001123 || s.Events[0].Attributes[0].Value.GetIntValue() != 1 {
		t.Errorf("events: %v", s.Events)
	}
	if len(s.Links) != 1 || s.Links[0].SpanId[0] != 3 || s.Links[0].Attributes[0].Value.GetStringValue() != "v" || s.Links[0].Flags != 0x100 {
		t.Errorf("links: %v", s.Links)
	}
}

// TestOTLPExporter_environment: the endpoint, headers, compression and protocol come from
// the standard variables (the per-signal one first); a bad value is an error at start.
func TestOTLPExporter_environment(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			z, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = z
		}
		b, _ := io.ReadAll(body)
		var req collectortrace.ExportTraceServiceRequest
		if proto.Unmarshal(b, &req) != nil || len(req.ResourceSpans) != 1 {
			http.Error(w, "bad", 400)
			return
		}
		got.Store(r.URL.Path + " " + r.Header.Get("X-Key") + " " + r.Header.Get("Content-Encoding"))
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://unused.invalid")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/custom")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-Key=a%20b")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
	e, err := newOTLPExporter()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{stubSpan("a", "s")}); err != nil {
		t.Fatal(err)
	}
	if g, _ := got.Load().(string); g != "/custom a b gzip" {
		t.Fatalf("collector saw %q", g)
	}
	for name, val := range map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "localhost:4318",
		"OTEL_EXPORTER_OTLP_HEADERS": "novalue", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "zstd",
		"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent.pem"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, val)
			if _, err := newOTLPExporter(); err == nil {
				t.Fatalf("%s=%s accepted", name, val)
			}
		})
	}
}

// TestOTLPExporter_retries: 503 with Retry-After is retried until the collector takes the
// batch; 400 is not retried; a collector that keeps failing ends within the retry bound.
func TestOTLPExporter_retries(t *testing.T) {
	var calls atomic.Int32
	status := atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if s := int(status.Load()); s != 0 && (s != 503 || n < 3) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", s)
		}
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	e, err := newOTLPExporter()
	if err != nil {
		t.Fatal(err)
	}
	spans := []sdktrace.ReadOnlySpan{stubSpan("a", "s")}
	status.Store(503)
	if err := e.ExportSpans(context.Background(), spans); err != nil || calls.Load() != 3 {
		t.Fatalf("503 twice, then 200: err %v after %d posts", err, calls.Load())
	}
	calls.Store(0)
	status.Store(400)
	if err := e.ExportSpans(context.Background(), spans); err == nil || calls.Load() != 1 || !strings.Contains(err.Error(), "400") {
		t.Fatalf("400: err %v after %d posts", err, calls.Load())
	}
	calls.Store(0)
	status.Store(429)
	e.retryFor = 2500 * time.Millisecond
	if err := e.ExportSpans(context.Background(), spans); err == nil || calls.Load() < 2 || calls.Load() > 4 {
		t.Fatalf("429 always: err %v after %d posts", err, calls.Load())
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls.Store(0)
	if err := e.ExportSpans(context.Background(), spans); err != nil || calls.Load() != 0 {
		t.Fatalf("after shutdown: err %v, %d posts", err, calls.Load())
	}
}
