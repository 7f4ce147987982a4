package ops

import (
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/internal/termsafe"
)

// TestMetrics_latencyByTool: tool_called events fill
// stategate_tool_call_duration_seconds{tool,outcome} (a name never listed is _other) and
// stategate_gateway_overhead_seconds{tool} with the call's duration minus the upstream's,
// read back through the client library's text parser; Latencies gives p50/p95 per tool.
func TestMetrics_latencyByTool(t *testing.T) {
	m := NewMetrics(func(n string) bool { return n == "crm.search" }, nil)
	for i := 0; i < 100; i++ {
		// 100 calls of 20ms..119ms, of which the upstream took all but 2ms.
		us := int64(20000 + i*1000)
		m.Publish(events.Event{Type: events.EventToolCalled, Tool: "crm.search",
			Data: map[string]any{"durationUs": us, "upstreamUs": us - 2000, "outcome": "success"}})
	}
	m.Publish(events.Event{Type: events.EventToolCalled, Tool: "made.up", Data: map[string]any{"durationUs": int64(300), "outcome": "denied"}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	h := fams["stategate_tool_call_duration_seconds"]
	got := map[string]uint64{}
	for _, mt := range h.GetMetric() {
		key := ""
		for _, l := range mt.GetLabel() {
			key += l.GetName() + "=" + l.GetValue() + " "
		}
		got[strings.TrimSpace(key)] = mt.GetHistogram().GetSampleCount()
	}
	if got["outcome=success tool=crm.search"] != 100 || got["outcome=denied tool=_other"] != 1 || len(got) != 2 {
		t.Fatalf("duration series: %v", got)
	}
	for _, mt := range fams["stategate_gateway_overhead_seconds"].GetMetric() {
		if mt.GetLabel()[0].GetValue() != "crm.search" {
			continue
		}
		hist := mt.GetHistogram()
		if mean := hist.GetSampleSum() / float64(hist.GetSampleCount()); math.Abs(mean-0.002) > 1e-9 {
			t.Fatalf("overhead mean %v, want 2ms", mean)
		}
	}
	lat := m.Latencies()["crm.search"]
	// 50 of the 100 calls are under 70ms; the buckets are 50ms and 100ms: interpolated.
	if lat.Calls != 100 || lat.P50 < 0.05 || lat.P50 > 0.1 || lat.P95 < lat.P50 || lat.P95 > 0.25 {
		t.Fatalf("latency %+v", lat)
	}
}

// TestMetrics_labelValuesReachNoTerminal: a listed tool whose name holds an ESC sequence,
// a bidi override and a backslash is exposed with visible escapes (no raw control byte in
// the body, which the text parser still reads), while Latencies keeps the name as listed.
func TestMetrics_labelValuesReachNoTerminal(t *testing.T) {
	hostile := "evil\x1b]0;owned\x07\u202e.tool\\x"
	m := NewMetrics(func(n string) bool { return n == hostile }, nil)
	m.Publish(events.Event{Type: events.EventToolCalled, Tool: hostile, Data: map[string]any{"durationUs": int64(1000), "outcome": "success"}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, r := range body {
		if r != '\n' && termsafe.Control(r) {
			t.Fatalf("raw control %U in the exposition:\n%s", r, body)
		}
	}
	want := termsafe.String(hostile)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mt := range fams["stategate_tool_calls_total"].GetMetric() {
		for _, l := range mt.GetLabel() {
			found = found || (l.GetName() == "tool" && l.GetValue() == want)
		}
	}
	if !found {
		t.Fatalf("no stategate_tool_calls_total{tool=%q}:\n%s", want, body)
	}
	if _, ok := m.Latencies()[hostile]; !ok {
		t.Fatalf("Latencies lost the listed name: %v", m.Latencies())
	}
}
