package ops

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/internal/termsafe"
	"google.golang.org/protobuf/proto"
)

// OtherTool is the tool label of calls to names the upstream never listed.
const OtherTool = "_other"

// counterNames are the metric names of the exchange core's counters. tool_calls and
// transitions are counted from events instead, with labels (tool, outcome; workflow).
var counterNames = [stats.NumCounters]struct{ name, help string }{
	stats.CountAllowed:         {"stategate_calls_allowed_total", "tools/call requests admitted and forwarded to the upstream."},
	stats.CountRejected:        {"stategate_requests_rejected_total", "Requests refused with a JSON-RPC error."},
	stats.CountTimeouts:        {"stategate_timeouts_total", "tools/call requests answered with TOOL_TIMEOUT."},
	stats.CountInvalidations:   {"stategate_invalidations_total", "Results that carried the invalidation block."},
	stats.CountTransitions:     {"stategate_state_writes_total", "Workflow snapshots stored."},
	stats.CountListChanged:     {"stategate_list_changed_total", "Calls after which the visible tool set changed."},
	stats.CountListsDecorated:  {"stategate_lists_decorated_total", "tools/list answers decorated."},
	stats.CountCASConflicts:    {"stategate_cas_conflicts_total", "Compare-and-set rounds lost to a concurrent call."},
	stats.CountIDsRemapped:     {"stategate_ids_remapped_total", "Requests whose JSON-RPC id the upstream saw replaced."},
	stats.CountTasksCreated:    {"stategate_tasks_created_total", "Task-augmented tools/call requests the upstream answered with a task."},
	stats.CountTasksSettled:    {"stategate_tasks_settled_total", "Tasks whose end the gateway settled (workflow, health, cache), once each."},
	stats.CountSessionsIssued:  {"stategate_sessions_issued_total", "Sessions the gateway issued to clients of an upstream that issues none."},
	stats.CountSessionsEnded:   {"stategate_sessions_ended_total", "Gateway sessions ended by DELETE."},
	stats.CountToolsWithheld:   {"stategate_tools_withheld_total", "Tools withheld from tools/list answers because a tool object repeats a member."},
	stats.CountListCacheHits:   {"stategate_list_cache_hits_total", "tools/list requests answered from the gateway's copy of the upstream's list."},
	stats.CountListCacheMisses: {"stategate_list_cache_misses_total", "tools/list requests the copy could have answered that went to the upstream."},
	stats.CountApprovalsHeld:   {"stategate_approvals_held_total", "tools/call requests held for an operator's approval (approval_decided events say how each ended)."},
}

// Metrics is the gateway's Prometheus registry. It is an events.Publisher (tool calls,
// transitions, events) and an exchange.Reporter (counters, faults).
type Metrics struct {
	Registry *prometheus.Registry

	listed      func(string) bool
	counters    [stats.NumCounters]prometheus.Counter
	requests    *prometheus.CounterVec // by method
	denials     *prometheus.CounterVec // by code
	cacheReqs   *prometheus.CounterVec // by result
	faults      *prometheus.CounterVec
	toolCalls   *prometheus.CounterVec
	toolSecs    *prometheus.HistogramVec // by tool, outcome
	overhead    *prometheus.HistogramVec // by tool: the call's duration minus the upstream's
	transitions *prometheus.CounterVec
	events      *prometheus.CounterVec
	dropped     prometheus.Counter
	appState    *prometheus.GaugeVec
	replaced    prometheus.Counter
	reloads     *prometheus.CounterVec
	storeErrors prometheus.Counter
	httpSecs    *prometheus.HistogramVec

	refMu    sync.Mutex
	refusals map[string]Refusal // the last refusal per tool label
}

// Refusal is a tool's last refusal: its code and when.
type Refusal struct {
	Code string    `json:"code"`
	At   time.Time `json:"at"`
}

// LastRefusals returns each tool's last refusal (tools the upstream never listed are
// OtherTool), for the status page.
func (m *Metrics) LastRefusals() map[string]Refusal {
	m.refMu.Lock()
	defer m.refMu.Unlock()
	return maps.Clone(m.refusals)
}

// ToolLister lists the tools with their modes (exchange.Operator.Tools); health.ErrOff means
// there is nothing to export.
type ToolLister func(ctx context.Context) ([]health.ToolStatus, error)

// NewMetrics registers every metric. listed says whether the upstream listed a tool name
// (exchange.Core.Listed): other names are labelled OtherTool, so clients cannot grow the
// label set. tools, when set, is read at each scrape for stategate_tool_mode.
func NewMetrics(listed func(string) bool, tools ToolLister) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), listed: listed}
	r := m.Registry
	for c, n := range counterNames {
		if n.name != "" {
			m.counters[c] = prometheus.NewCounter(prometheus.CounterOpts{Name: n.name, Help: n.help})
			r.MustRegister(m.counters[c])
		}
	}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stategate_requests_total",
		Help: "MCP POST requests admitted or refused, by JSON-RPC method (_none: no method; _other: not an MCP method)."}, []string{"method"})
	m.denials = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stategate_denials_total",
		Help: "tools/call requests answered by the gateway (gate, limits, health, fail-closed), by denial code."}, []string{"code"})
	m.cacheReqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stategate_cache_requests_total",
		Help: "Cacheable tools/call requests by result: hit, miss, coalesced (answered by another call's upstream answer)."}, []string{"result"})
	r.MustRegister(m.requests, m.denials, m.cacheReqs)
	for _, res := range []string{"hit", "miss", "coalesced"} {
		m.cacheReqs.WithLabelValues(res)
	}
	m.faults = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stategate_faults_total",
		Help: "Faults by kind (abi fault table) with the policy applied."}, []string{"fault", "policy"})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stategate_tool_calls_total",
		Help: "tools/call requests by tool (names the upstream listed, else _other) and outcome."}, []string{"tool", "outcome"})
	m.toolSecs = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stategate_tool_call_duration_seconds",
		Help:    "tools/call duration through the gateway, by tool (names the upstream listed, else _other) and outcome.",
		Buckets: toolBuckets}, []string{"tool", "outcome"})
	m.overhead = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stategate_gateway_overhead_seconds",
		Help:    "The gateway's own share of each tools/call (its duration minus the upstream's), by tool.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}}, []string{"tool"})
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stategate_transitions_total",
		Help: "Committed workflow transitions by workflow."}, []string{"workflow"})
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stategate_events_total",
		Help: "Events published, by type."}, []string{"type"})
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "stategate_events_dropped_total",
		Help: "Events slow subscribers lost."})
	m.appState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "stategate_app_state",
		Help: "1 for the gateway's current state, 0 for the others."}, []string{"state"})
	m.replaced = prometheus.NewCounter(prometheus.CounterOpts{Name: "stategate_plugin_instances_replaced_total",
		Help: "Plugin instances discarded after a trap or an overrun."})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stategate_config_reloads_total",
		Help: "Configuration reloads by result (ok, failed)."}, []string{"result"})
	m.storeErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "stategate_store_errors_total",
		Help: "Store failures: state faults of calls and lists, and failed store probes."})
	m.httpSecs = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stategate_http_request_duration_seconds",
		Help: "MCP listener request duration by HTTP method (a GET stream counts when it ends).", Buckets: prometheus.DefBuckets},
		[]string{"method"})
	r.MustRegister(m.faults, m.toolCalls, m.toolSecs, m.overhead, m.transitions, m.events, m.dropped, m.appState, m.replaced,
		m.reloads, m.storeErrors, m.httpSecs, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	for _, res := range []string{"ok", "failed"} {
		m.reloads.WithLabelValues(res)
	}
	if tools != nil {
		r.MustRegister(&modeCollector{tools: tools})
	}
	return m
}

// Publish implements events.Publisher.
func (m *Metrics) Publish(e events.Event) {
	m.events.WithLabelValues(e.Type).Inc()
	switch e.Type {
	case events.EventToolCalled:
		outcome, _ := e.Data["outcome"].(string)
		tool := e.Tool
		if m.listed == nil || !m.listed(tool) {
			tool = OtherTool
		}
		m.toolCalls.WithLabelValues(tool, outcome).Inc()
		us, ok := e.Data["durationUs"].(int64)
		if !ok {
			ms, _ := e.Data["durationMs"].(int64)
			us = ms * 1000
		}
		m.toolSecs.WithLabelValues(tool, outcome).Observe(float64(us) / 1e6)
		up, _ := e.Data["upstreamUs"].(int64)
		m.overhead.WithLabelValues(tool).Observe(float64(max(us-up, 0)) / 1e6)
	case events.EventCallRefused:
		code, _ := e.Data["code"].(string)
		tool := e.Tool
		if m.listed == nil || !m.listed(tool) {
			tool = OtherTool
		}
		m.refMu.Lock()
		if m.refusals == nil {
			m.refusals = map[string]Refusal{}
		}
		m.refusals[tool] = Refusal{Code: code, At: e.Timestamp}
		m.refMu.Unlock()
	case events.EventWorkflowTransitioned:
		w, _ := e.Data["workflow"].(string)
		m.transitions.WithLabelValues(w).Inc()
	case events.EventStoreUnavailable:
		m.storeErrors.Inc()
	case events.EventConfigReloaded:
		m.reloads.WithLabelValues("ok").Inc()
	case events.EventConfigReloadFailed:
		m.reloads.WithLabelValues("failed").Inc()
	}
}

// toolBuckets are the tool call histogram's bounds (seconds): 12, so a thousand listed
// tools by five outcomes stay within a scrape's means.
var toolBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 30}

// Latency is a tool's call latency from the histogram: calls, and the 50th and 95th
// percentiles in seconds, interpolated within buckets as Prometheus's
// histogram_quantile does (every outcome together).
type Latency struct {
	Calls uint64  `json:"calls"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
}

// Latencies returns each tool's latency (the status page's figures), read from the
// histogram itself (not a whole-registry gather).
func (m *Metrics) Latencies() map[string]Latency {
	type acc struct {
		count  uint64
		counts []uint64 // cumulative, per toolBuckets
	}
	tools := map[string]*acc{}
	ch := make(chan prometheus.Metric, 64)
	go func() {
		m.toolSecs.Collect(ch)
		close(ch)
	}()
	for metric := range ch {
		var mt dto.Metric
		if metric.Write(&mt) != nil || mt.GetHistogram() == nil {
			continue
		}
		tool := ""
		for _, l := range mt.GetLabel() {
			if l.GetName() == "tool" {
				tool = l.GetValue()
			}
		}
		a := tools[tool]
		if a == nil {
			a = &acc{counts: make([]uint64, len(toolBuckets))}
			tools[tool] = a
		}
		h := mt.GetHistogram()
		a.count += h.GetSampleCount()
		for i, b := range h.GetBucket() {
			if i < len(a.counts) {
				a.counts[i] += b.GetCumulativeCount()
			}
		}
	}
	out := make(map[string]Latency, len(tools))
	for tool, a := range tools {
		if a.count > 0 {
			out[tool] = Latency{Calls: a.count, P50: quantile(0.5, a.counts, a.count), P95: quantile(0.95, a.counts, a.count)}
		}
	}
	return out
}

// quantile interpolates q within the cumulative bucket counts (the last bucket's bound
// for what lies beyond it).
func quantile(q float64, cum []uint64, total uint64) float64 {
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for i, c := range cum {
		if float64(c) >= rank {
			if c == below {
				return toolBuckets[i]
			}
			return lower + (toolBuckets[i]-lower)*(rank-float64(below))/float64(c-below)
		}
		lower, below = toolBuckets[i], c
	}
	return toolBuckets[len(toolBuckets)-1]
}

// Count implements exchange.Reporter.
func (m *Metrics) Count(c stats.Counter) {
	switch c {
	case stats.CountRequests, stats.CountDenied:
		m.CountLabel(c, stats.LabelNone)
	case stats.CountCacheHits:
		m.cacheReqs.WithLabelValues("hit").Inc()
	case stats.CountCacheMisses:
		m.cacheReqs.WithLabelValues("miss").Inc()
	case stats.CountCacheCoalesced:
		m.cacheReqs.WithLabelValues("coalesced").Inc()
	}
	if c >= 0 && c < stats.NumCounters && m.counters[c] != nil {
		m.counters[c].Inc()
	}
}

// CountLabel implements stats.LabelReporter: requests by method, denials by code.
func (m *Metrics) CountLabel(c stats.Counter, label string) {
	switch c {
	case stats.CountRequests:
		m.requests.WithLabelValues(label).Inc()
	case stats.CountDenied:
		m.denials.WithLabelValues(label).Inc()
	default:
		m.Count(c)
	}
}

// Fault implements exchange.Reporter.
func (m *Metrics) Fault(f abi.Fault, p abi.Policy, _ error, _ ...any) {
	m.faults.WithLabelValues(f.String(), p.String()).Inc()
	if f == abi.FaultGateStore || f == abi.FaultListStore {
		m.storeErrors.Inc()
	}
}

// Dropped counts one event a slow subscriber lost (Bus.OnDrop).
func (m *Metrics) Dropped() { m.dropped.Inc() }

// PluginReplaced counts one discarded plugin instance (host.PoolOptions.Replaced).
func (m *Metrics) PluginReplaced() { m.replaced.Inc() }

// AppState sets the state gauge (NewApp's onState).
func (m *Metrics) AppState(s AppState) {
	for _, st := range AppStates {
		v := 0.0
		if st == s {
			v = 1
		}
		m.appState.WithLabelValues(string(st)).Set(v)
	}
}

// Instrument wraps the MCP handler to observe request durations.
func (m *Metrics) Instrument(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		method := r.Method
		switch method {
		case http.MethodGet, http.MethodPost, http.MethodDelete:
		default:
			method = "other"
		}
		m.httpSecs.WithLabelValues(method).Observe(time.Since(start).Seconds())
	})
}

// Handler serves the registry in the Prometheus exposition formats, with every label value
// rendered by termsafe (termSafeGatherer).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(termSafeGatherer{m.Registry}, promhttp.HandlerOpts{Registry: m.Registry})
}

// termSafeGatherer renders label values for a terminal as they are exposed. Tool names
// come from the upstream, and the exposition format escapes only backslash, double quote
// and line feed: an ESC in a tool's name would reach the terminal of an operator running
// `curl /metrics` raw. termsafe's escapes are visible text (and double the backslash, so
// two names never expose alike), and the metrics themselves keep the names as listed, so
// the status page's lookups by name (Latencies, LastRefusals) are unchanged.
type termSafeGatherer struct{ prometheus.Gatherer }

func (g termSafeGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := g.Gatherer.Gather()
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			mt.Label = termSafeLabels(mt.Label)
		}
	}
	return mfs, err
}

// termSafeLabels returns labels with each value rendered by termsafe: a new slice when one
// changes (the metrics share theirs with every gather, so they are never written to).
func termSafeLabels(labels []*dto.LabelPair) []*dto.LabelPair {
	var out []*dto.LabelPair
	for i, l := range labels {
		v := l.GetValue()
		safe := termsafe.String(v)
		if safe == v {
			continue
		}
		if out == nil {
			out = append([]*dto.LabelPair(nil), labels...)
		}
		out[i] = &dto.LabelPair{Name: l.Name, Value: proto.String(safe)}
	}
	if out == nil {
		return labels
	}
	return out
}

// modeCollector exports stategate_tool_mode{tool,mode} from the health feature at scrape
// time (nothing while health is off).
type modeCollector struct{ tools ToolLister }

var modeDesc = prometheus.NewDesc("stategate_tool_mode", "1 for each tool's current health mode (when health is configured).",
	[]string{"tool", "mode"}, nil)

func (c *modeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- modeDesc }

func (c *modeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ts, err := c.tools(ctx)
	if err != nil {
		if !errors.Is(err, health.ErrOff) {
			ch <- prometheus.NewInvalidMetric(modeDesc, err)
		}
		return
	}
	for _, t := range ts {
		ch <- prometheus.MustNewConstMetric(modeDesc, prometheus.GaugeValue, 1, t.Name, t.Mode)
	}
}
