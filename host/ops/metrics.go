package ops

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
)

// OtherTool is the tool label of calls to names the upstream never listed.
const OtherTool = "_other"

// counterNames are the metric names of the exchange core's counters. tool_calls and
// transitions are counted from events instead, with labels (tool, outcome; workflow).
var counterNames = [exchange.NumCounters]struct{ name, help string }{
	exchange.CountAllowed:        {"stategate_calls_allowed_total", "tools/call requests admitted and forwarded to the upstream."},
	exchange.CountRejected:       {"stategate_requests_rejected_total", "Requests refused with a JSON-RPC error."},
	exchange.CountTimeouts:       {"stategate_timeouts_total", "tools/call requests answered with TOOL_TIMEOUT."},
	exchange.CountInvalidations:  {"stategate_invalidations_total", "Results that carried the invalidation block."},
	exchange.CountTransitions:    {"stategate_state_writes_total", "Workflow snapshots stored."},
	exchange.CountListChanged:    {"stategate_list_changed_total", "Calls after which the visible tool set changed."},
	exchange.CountListsDecorated: {"stategate_lists_decorated_total", "tools/list answers decorated."},
	exchange.CountCASConflicts:   {"stategate_cas_conflicts_total", "Compare-and-set rounds lost to a concurrent call."},
	exchange.CountIDsRemapped:    {"stategate_ids_remapped_total", "Requests whose JSON-RPC id the upstream saw replaced."},
	exchange.CountTasksCreated:   {"stategate_tasks_created_total", "Task-augmented tools/call requests the upstream answered with a task."},
	exchange.CountTasksSettled:   {"stategate_tasks_settled_total", "Tasks whose end the gateway settled (workflow, health, cache), once each."},
	exchange.CountSessionsIssued: {"stategate_sessions_issued_total", "Sessions the gateway issued to clients of an upstream that issues none."},
	exchange.CountSessionsEnded:  {"stategate_sessions_ended_total", "Gateway sessions ended by DELETE."},
	exchange.CountToolsWithheld:  {"stategate_tools_withheld_total", "Tools withheld from tools/list answers because a tool object repeats a member."},
}

// Metrics is the gateway's Prometheus registry. It is an exchange.Publisher (tool calls,
// transitions, events) and an exchange.Reporter (counters, faults).
type Metrics struct {
	Registry *prometheus.Registry

	listed      func(string) bool
	counters    [exchange.NumCounters]prometheus.Counter
	requests    *prometheus.CounterVec // by method
	denials     *prometheus.CounterVec // by code
	cacheReqs   *prometheus.CounterVec // by result
	faults      *prometheus.CounterVec
	toolCalls   *prometheus.CounterVec
	toolSecs    *prometheus.HistogramVec
	transitions *prometheus.CounterVec
	events      *prometheus.CounterVec
	dropped     prometheus.Counter
	appState    *prometheus.GaugeVec
	replaced    prometheus.Counter
	reloads     *prometheus.CounterVec
	storeErrors prometheus.Counter
	httpSecs    *prometheus.HistogramVec
}

// ToolLister lists the tools with their modes (exchange.Core.Tools); ErrHealthOff means
// there is nothing to export.
type ToolLister func(ctx context.Context) ([]exchange.ToolStatus, error)

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
		Help:    "tools/call duration through the gateway, by outcome (millisecond resolution).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"outcome"})
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
	r.MustRegister(m.faults, m.toolCalls, m.toolSecs, m.transitions, m.events, m.dropped, m.appState, m.replaced,
		m.reloads, m.storeErrors, m.httpSecs, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	for _, o := range []string{exchange.OutcomeSuccess, exchange.OutcomeError, exchange.OutcomeDenied, exchange.OutcomeTimeout, exchange.OutcomeFailed} {
		m.toolSecs.WithLabelValues(o)
	}
	for _, res := range []string{"ok", "failed"} {
		m.reloads.WithLabelValues(res)
	}
	if tools != nil {
		r.MustRegister(&modeCollector{tools: tools})
	}
	return m
}

// Publish implements exchange.Publisher.
func (m *Metrics) Publish(e exchange.Event) {
	m.events.WithLabelValues(e.Type).Inc()
	switch e.Type {
	case exchange.EventToolCalled:
		outcome, _ := e.Data["outcome"].(string)
		tool := e.Tool
		if m.listed == nil || !m.listed(tool) {
			tool = OtherTool
		}
		m.toolCalls.WithLabelValues(tool, outcome).Inc()
		if ms, ok := e.Data["durationMs"].(int64); ok {
			m.toolSecs.WithLabelValues(outcome).Observe(float64(ms) / 1000)
		}
	case exchange.EventWorkflowTransitioned:
		w, _ := e.Data["workflow"].(string)
		m.transitions.WithLabelValues(w).Inc()
	case exchange.EventStoreUnavailable:
		m.storeErrors.Inc()
	case exchange.EventConfigReloaded:
		m.reloads.WithLabelValues("ok").Inc()
	case exchange.EventConfigReloadFailed:
		m.reloads.WithLabelValues("failed").Inc()
	}
}

// Count implements exchange.Reporter.
func (m *Metrics) Count(c exchange.Counter) {
	switch c {
	case exchange.CountRequests, exchange.CountDenied:
		m.CountLabel(c, exchange.LabelNone)
	case exchange.CountCacheHits:
		m.cacheReqs.WithLabelValues("hit").Inc()
	case exchange.CountCacheMisses:
		m.cacheReqs.WithLabelValues("miss").Inc()
	case exchange.CountCacheCoalesced:
		m.cacheReqs.WithLabelValues("coalesced").Inc()
	}
	if c >= 0 && c < exchange.NumCounters && m.counters[c] != nil {
		m.counters[c].Inc()
	}
}

// CountLabel implements exchange.LabelReporter: requests by method, denials by code.
func (m *Metrics) CountLabel(c exchange.Counter, label string) {
	switch c {
	case exchange.CountRequests:
		m.requests.WithLabelValues(label).Inc()
	case exchange.CountDenied:
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

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
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
		if !errors.Is(err, exchange.ErrHealthOff) {
			ch <- prometheus.NewInvalidMetric(modeDesc, err)
		}
		return
	}
	for _, t := range ts {
		ch <- prometheus.MustNewConstMetric(modeDesc, prometheus.GaugeValue, 1, t.Name, t.Mode)
	}
}
