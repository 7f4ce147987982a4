package serve

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// otlpExporter exports spans as OTLP over HTTP with protobuf bodies (http/protobuf, the
// OTLP default), written with the standard library's varints: the OpenTelemetry SDK's own
// exporter (otlptracehttp) links gRPC and the protobuf runtime into the binary for the
// same bytes (RATIONALE.md, "A fast front door"). It reads the standard
// OTEL_EXPORTER_OTLP_[TRACES_]{ENDPOINT,HEADERS,TIMEOUT,COMPRESSION,CERTIFICATE,
// CLIENT_CERTIFICATE,CLIENT_KEY} variables, the per-signal one first. A batch is retried
// on 429, 502, 503, 504 and on a failed connection, honouring Retry-After, within 15 s.
type otlpExporter struct {
	url      string
	headers  http.Header
	gzip     bool
	timeout  time.Duration
	client   *http.Client
	retryFor time.Duration
	stopped  atomic.Bool
}

// otlpEnv reads OTEL_EXPORTER_OTLP_TRACES_<name>, then OTEL_EXPORTER_OTLP_<name>.
func otlpEnv(name string) string {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_" + name)
}

// newOTLPExporter configures the exporter from the environment.
func newOTLPExporter() (*otlpExporter, error) {
	for _, p := range []string{os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")} {
		if p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("OTLP protocol %q: stategate exports traces over http/protobuf only", p)
		}
	}
	e := &otlpExporter{headers: http.Header{}, timeout: 5 * time.Second, retryFor: 15 * time.Second}
	if u := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); u != "" {
		e.url = u // the signal's own endpoint is used as it is
	} else {
		base := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		if base == "" {
			base = "http://localhost:4318"
		}
		e.url = strings.TrimSuffix(base, "/") + "/v1/traces"
	}
	if u, err := url.Parse(e.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP endpoint %q: want an http:// or https:// URL", e.url)
	}
	if h := otlpEnv("HEADERS"); h != "" {
		for _, kv := range strings.Split(h, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k, err1 := url.PathUnescape(strings.TrimSpace(k))
			v, err2 := url.PathUnescape(strings.TrimSpace(v))
			if !ok || k == "" || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("OTLP headers: %q is not key=value (URL-encoded)", kv)
			}
			e.headers.Add(k, v)
		}
	}
	if t := otlpEnv("TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTLP timeout %q: want milliseconds > 0", t)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch c := otlpEnv("COMPRESSION"); c {
	case "gzip":
		e.gzip = true
	case "", "none":
	default:
		return nil, fmt.Errorf("OTLP compression %q: want gzip or none", c)
	}
	tlsConf, err := otlpTLS()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	e.client = &http.Client{Transport: tr}
	return e, nil
}

// otlpTLS reads the CA and client certificates, nil when none is set.
func otlpTLS() (*tls.Config, error) {
	ca, cert, key := otlpEnv("CERTIFICATE"), otlpEnv("CLIENT_CERTIFICATE"), otlpEnv("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("OTLP certificate: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTLP certificate %s: no PEM certificate in it", ca)
		}
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("OTLP client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// ExportSpans posts one ExportTraceServiceRequest holding spans.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 || e.stopped.Load() {
		return nil
	}
	body := appendExportRequest(nil, spans)
	if e.gzip {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(body)
		w.Close()
		body = z.Bytes()
	}
	deadline := time.Now().Add(e.retryFor)
	wait := time.Second
	for {
		retry, after, err := e.post(ctx, body)
		if err == nil || !retry {
			return err
		}
		if after <= 0 {
			after, wait = wait, min(2*wait, 5*time.Second)
		}
		if time.Now().Add(after).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(after):
		}
	}
}

// post sends one body: retry says whether a failure may be retried, after how long the
// collector asked to wait (0: not said).
func (e *otlpExporter) post(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "stategate")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return ctx.Err() == nil, 0, fmt.Errorf("OTLP export: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 == 2 {
		return false, 0, nil
	}
	err = fmt.Errorf("OTLP export: %s from %s: %.200q", resp.Status, e.url, msg)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return true, after, err
	}
	return false, 0, err
}

// Shutdown stops exporting; the batch processor has flushed before it calls this.
func (e *otlpExporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}

// The protobuf wire (opentelemetry-proto, collector/trace/v1 and trace/v1): field numbers
// of the messages written below. Every message is written into its own buffer and then
// appended length-prefixed: batches are small, and this keeps the writer simple.

// appendTag appends a field's key: its number and wire type (0 varint, 1 fixed64,
// 2 length-delimited, 5 fixed32).
func appendTag(b []byte, num, wire int) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(wire))
}

func appendBytesField(b []byte, num int, v []byte) []byte {
	b = appendTag(b, num, 2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendStringField(b []byte, num int, v string) []byte {
	if v == "" {
		return b
	}
	b = appendTag(b, num, 2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendVarintField(b []byte, num int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(appendTag(b, num, 0), v)
}

func appendFixed64Field(b []byte, num int, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(appendTag(b, num, 1), v)
}

func appendFixed32Field(b []byte, num int, v uint32) []byte {
	return binary.LittleEndian.AppendUint32(appendTag(b, num, 5), v)
}

// appendMessage appends a nested message: write fills a fresh buffer.
func appendMessage(b []byte, num int, write func([]byte) []byte) []byte {
	return appendBytesField(b, num, write(nil))
}

// appendExportRequest writes an ExportTraceServiceRequest: the spans grouped by resource
// (ResourceSpans, 1) and instrumentation scope (ScopeSpans, 2), in the order met.
func appendExportRequest(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	type group struct {
		res    *resource.Resource
		scopes []instrumentation.Scope
		spans  [][]sdktrace.ReadOnlySpan
	}
	var groups []*group
	for _, s := range spans {
		var g *group
		for _, x := range groups {
			if x.res.Equal(s.Resource()) {
				g = x
			}
		}
		if g == nil {
			g = &group{res: s.Resource()}
			groups = append(groups, g)
		}
		at := -1
		for i, sc := range g.scopes {
			if sc.Name == s.InstrumentationScope().Name && sc.Version == s.InstrumentationScope().Version && sc.SchemaURL == s.InstrumentationScope().SchemaURL {
				at = i
			}
		}
		if at < 0 {
			at = len(g.scopes)
			g.scopes = append(g.scopes, s.InstrumentationScope())
			g.spans = append(g.spans, nil)
		}
		g.spans[at] = append(g.spans[at], s)
	}
	for _, g := range groups {
		b = appendMessage(b, 1, func(b []byte) []byte { // ResourceSpans
			b = appendMessage(b, 1, func(b []byte) []byte { // Resource
				return appendAttributes(b, 1, g.res.Attributes())
			})
			for i, sc := range g.scopes {
				b = appendMessage(b, 2, func(b []byte) []byte { // ScopeSpans
					b = appendMessage(b, 1, func(b []byte) []byte { // InstrumentationScope
						b = appendStringField(b, 1, sc.Name)
						b = appendStringField(b, 2, sc.Version)
						return appendAttributes(b, 3, sc.Attributes.ToSlice())
					})
					for _, s := range g.spans[i] {
						b = appendMessage(b, 2, func(b []byte) []byte { return appendSpan(b, s) })
					}
					return appendStringField(b, 3, sc.SchemaURL)
				})
			}
			return appendStringField(b, 3, g.res.SchemaURL())
		})
	}
	return b
}

// appendSpan writes a Span's fields.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytesField(b, 1, tid[:])
	b = appendBytesField(b, 2, sid[:])
	b = appendStringField(b, 3, sc.TraceState().String())
	if p := s.Parent(); p.SpanID().IsValid() {
		psid := p.SpanID()
		b = appendBytesField(b, 4, psid[:])
	}
	b = appendStringField(b, 5, s.Name())
	b = appendVarintField(b, 6, uint64(s.SpanKind())) // trace.SpanKind numbers as OTLP's SpanKind
	b = appendFixed64Field(b, 7, unixNano(s.StartTime()))
	b = appendFixed64Field(b, 8, unixNano(s.EndTime()))
	b = appendAttributes(b, 9, s.Attributes())
	b = appendVarintField(b, 10, uint64(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		b = appendMessage(b, 11, func(b []byte) []byte { // Span.Event
			b = appendFixed64Field(b, 1, unixNano(ev.Time))
			b = appendStringField(b, 2, ev.Name)
			b = appendAttributes(b, 3, ev.Attributes)
			return appendVarintField(b, 4, uint64(ev.DroppedAttributeCount))
		})
	}
	b = appendVarintField(b, 12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = appendMessage(b, 13, func(b []byte) []byte { // Span.Link
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytesField(b, 1, ltid[:])
			b = appendBytesField(b, 2, lsid[:])
			b = appendStringField(b, 3, l.SpanContext.TraceState().String())
			b = appendAttributes(b, 4, l.Attributes)
			b = appendVarintField(b, 5, uint64(l.DroppedAttributeCount))
			return appendFixed32Field(b, 6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendVarintField(b, 14, uint64(s.DroppedLinks()))
	if st := s.Status(); st.Code != codes.Unset {
		b = appendMessage(b, 15, func(b []byte) []byte { // Status
			b = appendStringField(b, 2, st.Description)
			code := uint64(2) // STATUS_CODE_ERROR
			if st.Code == codes.Ok {
				code = 1
			}
			return appendVarintField(b, 3, code)
		})
	}
	return appendFixed32Field(b, 16, spanFlags(sc.TraceFlags(), s.Parent()))
}

// spanFlags is OTLP's SpanFlags: the W3C trace flags, and whether the parent is remote
// (known: always said).
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | 0x100 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	if parent.IsRemote() {
		f |= 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
	}
	return f
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

// appendAttributes writes each attribute as a KeyValue at field num.
func appendAttributes(b []byte, num int, attrs []attribute.KeyValue) []byte {
	for _, kv := range attrs {
		b = appendMessage(b, num, func(b []byte) []byte { // KeyValue
			b = appendStringField(b, 1, string(kv.Key))
			return appendMessage(b, 2, func(b []byte) []byte { return appendValue(b, kv.Value) })
		})
	}
	return b
}

// appendValue writes an AnyValue's fields.
func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		b = appendTag(b, 2, 0)
		if v.AsBool() {
			return append(b, 1)
		}
		return append(b, 0)
	case attribute.INT64:
		return binary.AppendUvarint(appendTag(b, 3, 0), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return appendFixed64Field(b, 4, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return appendBytesField(b, 1, []byte(v.AsString())) // an empty string is still a string
	case attribute.BYTESLICE:
		return appendBytesField(b, 7, v.AsByteSlice())
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		return appendMessage(b, 5, func(b []byte) []byte { // ArrayValue
			for _, e := range sliceValues(v) {
				b = appendMessage(b, 1, func(b []byte) []byte { return appendValue(b, e) })
			}
			return b
		})
	case attribute.MAP:
		return appendMessage(b, 6, func(b []byte) []byte { return appendAttributes(b, 1, v.AsMap()) }) // KeyValueList
	}
	return b // EMPTY: an AnyValue with no value
}

// sliceValues returns a slice value's elements as values.
func sliceValues(v attribute.Value) []attribute.Value {
	var out []attribute.Value
	switch v.Type() {
	case attribute.BOOLSLICE:
		for _, x := range v.AsBoolSlice() {
			out = append(out, attribute.BoolValue(x))
		}
	case attribute.INT64SLICE:
		for _, x := range v.AsInt64Slice() {
			out = append(out, attribute.Int64Value(x))
		}
	case attribute.FLOAT64SLICE:
		for _, x := range v.AsFloat64Slice() {
			out = append(out, attribute.Float64Value(x))
		}
	case attribute.STRINGSLICE:
		for _, x := range v.AsStringSlice() {
			out = append(out, attribute.StringValue(x))
		}
	case attribute.SLICE:
		out = v.AsSlice()
	}
	return out
}
