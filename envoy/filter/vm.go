// Package filter is the stategate proxy-wasm HTTP filter: the native engine
// (plugin/engine) inside an Envoy filter, speaking MCP over Streamable HTTP.
//
// # Notes
//
//   - POST bodies are peeked until their JSON-RPC method is known; only tools/call,
//     tools/list and initialize are buffered (up to Settings.MaxRequestBodyBytes). GET
//     streams and every other request pass untouched and are never paused.
//   - State lives in Envoy shared data under the engine's keys, written with
//     compare-and-set (store.go). Shared data has no delete: DELETE writes empty tombstones.
//   - What happens on a fault is decided by policyFor alone (failure.go).
//   - Every callback recovers from panics and applies the failure policy, so a bug answers
//     like a fault instead of trapping the VM: in the standard-Go module. TinyGo has no
//     recover() on wasm, so in the TinyGo module (make build.envoy) a panic traps the VM and
//     Envoy's failure_policy decides (the samples' FAIL_CLOSED: 503).
package filter

import (
	"context"
	"errors"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/stategate/stategate/internal/termsafe"
	"github.com/stategate/stategate/plugin/engine"
)

// NewVMContext returns the filter's VM context: the value to hand to
// proxywasm.SetVMContext, or to proxytest for native-mode tests.
func NewVMContext() types.VMContext { return &vmContext{} }

type vmContext struct {
	types.DefaultVMContext
	settings Settings
}

// OnVMStart reads the VM configuration (the filter settings). An invalid one fails the VM.
func (v *vmContext) OnVMStart(size int) types.OnVMStartStatus {
	v.settings = DefaultSettings
	if size == 0 {
		setGCHeap(DefaultSettings.GCHeapMiB)
		return types.OnVMStartStatusOK
	}
	doc, err := proxywasm.GetVMConfiguration()
	if err != nil {
		proxywasm.LogCritical("stategate: reading vm configuration: " + err.Error())
		return types.OnVMStartStatusFailed
	}
	s, err := ParseSettings(doc)
	if err != nil {
		proxywasm.LogCritical("stategate: " + err.Error())
		return types.OnVMStartStatusFailed
	}
	v.settings = s
	setGCHeap(s.GCHeapMiB)
	return types.OnVMStartStatusOK
}

// NewPluginContext runs before OnVMStart (proxy_on_context_create comes first), so the
// plugin reads the settings in OnPluginStart.
func (v *vmContext) NewPluginContext(uint32) types.PluginContext {
	return &pluginContext{vm: v}
}

type pluginContext struct {
	types.DefaultPluginContext
	vm       *vmContext
	settings Settings
	core     *exchange.Core
	flow     *flow.Flow // the answer leg (answer.go)
	origins  admission.OriginPolicy
	oauth    oauth.Map // Public empty: discovery documents and challenges pass unchanged

	metrics  bool
	faults   [abi.NumFaults]proxywasm.MetricCounter
	counters [stats.NumCounters]proxywasm.MetricCounter
	outcomes map[string]proxywasm.MetricCounter // stategate.tool_calls.<outcome>
	events   map[string]proxywasm.MetricCounter // stategate.events.<type>
}

// OnPluginStart builds the engine from the plugin configuration (the stategate
// configuration document). An invalid configuration fails the plugin, so Envoy rejects the
// listener instead of serving traffic without the gate.
func (p *pluginContext) OnPluginStart(size int) types.OnPluginStartStatus {
	p.settings = p.vm.settings
	var cfg []byte
	if size > 0 {
		var err error
		if cfg, err = proxywasm.GetPluginConfiguration(); err != nil {
			proxywasm.LogCritical("stategate: reading plugin configuration: " + err.Error())
			return types.OnPluginStartStatusFailed
		}
	}
	eng, err := engine.New(cfg)
	if err != nil {
		proxywasm.LogCritical("stategate: " + err.Error())
		return types.OnPluginStartStatusFailed
	}
	for _, w := range eng.Warnings() {
		proxywasm.LogWarn("stategate: configuration warning: " + w.String())
	}
	p.core = exchange.New(exchange.Options{
		Plugin:        enginePlugin{eng},
		State:         &sharedState{maxKeys: p.settings.MaxStateKeys, retries: p.settings.CASRetries},
		Reporter:      p,
		Publisher:     p,
		Config:        cfg,
		MaxBodyBytes:  p.settings.MaxRequestBodyBytes,
		CASRetries:    p.settings.CASRetries,
		ListMemoBytes: 8 << 20,
	})
	p.flow = flow.New(flow.Options{Core: p.core, MaxBodyBytes: p.settings.MaxResponseBodyBytes, Notify: func(flow.Notice) {
		// Envoy has no standing stream to carry it: the client sees the change on its next list.
		proxywasm.LogDebug("stategate: a message the answer cannot carry is dropped (visible tools changed on a JSON answer; clients see it on their next tools/list)")
	}})
	p.origins = admission.OriginPolicy{AllowedOrigins: p.settings.AllowedOrigins, AllowedHosts: p.settings.AllowedHosts}
	// Envoy's route, not the filter, picks the upstream path: the client's path is kept.
	p.oauth = oauth.Map{Public: p.settings.PublicURL}
	p.defineMetrics()
	return types.OnPluginStartStatusOK
}

func (p *pluginContext) defineMetrics() {
	for f := abi.Fault(0); f < abi.NumFaults; f++ {
		p.faults[f] = proxywasm.DefineCounterMetric("stategate.fault." + f.String())
	}
	for c := stats.Counter(0); c < stats.NumCounters; c++ {
		p.counters[c] = proxywasm.DefineCounterMetric("stategate." + c.String())
	}
	p.outcomes = map[string]proxywasm.MetricCounter{}
	for _, o := range []string{events.OutcomeSuccess, events.OutcomeError, events.OutcomeDenied, events.OutcomeTimeout, events.OutcomeFailed, events.OutcomeIncomplete} {
		p.outcomes[o] = proxywasm.DefineCounterMetric("stategate.tool_calls." + o)
	}
	p.events = map[string]proxywasm.MetricCounter{}
	for _, e := range []string{events.EventToolCalled, events.EventCallRefused, events.EventWorkflowTransitioned, events.EventCacheInvalidated, events.EventConfigUnknownTool} {
		p.events[e] = proxywasm.DefineCounterMetric("stategate.events." + e)
	}
	p.metrics = true
}

func (p *pluginContext) NewHttpContext(uint32) types.HttpContext {
	return &httpContext{p: p}
}

// enginePlugin runs engine exports in process, exactly as a Wasm host calls the plugin's.
type enginePlugin struct{ eng *engine.Engine }

func (e enginePlugin) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	return e.eng.AppendCall(make([]byte, 0, len(in)+256), fn, in), nil
}

// Fault implements exchange.Reporter: a log line and the metric stategate.fault.<name>.
func (p *pluginContext) Fault(f abi.Fault, pol abi.Policy, err error, attrs ...any) {
	if p.metrics {
		p.faults[f].Increment(1)
	}
	msg := "stategate: fault[" + f.String() + "] policy[" + pol.String() + "]: " + err.Error()
	for i := 0; i+1 < len(attrs); i += 2 {
		k, _ := attrs[i].(string)
		v, _ := attrs[i+1].(string)
		msg += " " + k + "[" + v + "]"
	}
	proxywasm.LogWarn(termsafe.String(msg)) // names and errors may be a client's or an upstream's
}

// fault reports a fault the filter itself found.
func (p *pluginContext) fault(f abi.Fault, detail string) {
	p.core.Fault(f, errors.New(detail))
}

// Publish implements events.Publisher: Envoy has no event bus, so events become metrics
// (stategate.events.<type>, stategate.tool_calls.<outcome>) and, for transitions, a log
// line. Tool names stay out of metric names (clients choose them).
func (p *pluginContext) Publish(e events.Event) {
	if p.metrics {
		if c, ok := p.events[e.Type]; ok {
			c.Increment(1)
		}
		if o, _ := e.Data["outcome"].(string); e.Type == events.EventToolCalled {
			if c, ok := p.outcomes[o]; ok {
				c.Increment(1)
			}
		}
	}
	if e.Type == events.EventWorkflowTransitioned {
		w, _ := e.Data["workflow"].(string)
		proxywasm.LogInfo(termsafe.String("stategate: workflow[" + w + "] " + e.OldState + " -> " + e.NewState + " by tool[" + e.Tool + "]"))
	}
}

// UnknownTool logs a configuration name no listed tool meets (exchange.ConfigReporter),
// once per configuration; stategate.events.config_unknown_tool counts them.
func (p *pluginContext) UnknownTool(u toollist.UnknownTool) {
	msg := "stategate: config names tool[" + u.Name + "], which the upstream does not list:"
	if u.Glob {
		msg = "stategate: config pattern[" + u.Name + "] matches no tool the upstream lists:"
	}
	for _, w := range u.Where {
		msg += " " + w.Path + " (" + w.Kind + ")"
	}
	proxywasm.LogWarn(termsafe.String(msg))
}

// Count implements exchange.Reporter: each core counter is the metric stategate.<name>.
func (p *pluginContext) Count(c stats.Counter) {
	if p.metrics {
		p.counters[c].Increment(1)
	}
}
