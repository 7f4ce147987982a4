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
//     like a fault instead of trapping the VM.
package filter

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/tidwall/gjson"

	"github.com/stategate/stategate/abi"
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
	eng      *engine.Engine
	// listChanged: the configuration has workflows, so initialize advertises
	// capabilities.tools.listChanged.
	listChanged     bool
	principalHeader string
	store           store

	metrics                              bool
	faults                               [numFaults]proxywasm.MetricCounter
	allowed, denied, listsDecorated      proxywasm.MetricCounter
	listChangedSent, casConflicts, local proxywasm.MetricCounter
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
	p.eng = eng
	// The workflows, through the ABI like any host: check_config lists them.
	p.listChanged = len(gjson.GetBytes(eng.Call(abi.FuncCheckConfig, nil), "workflows").Array()) > 0
	p.principalHeader = eng.Config().PrincipalHeader
	p.store = store{maxKeys: p.settings.MaxStateKeys}
	p.defineMetrics()
	return types.OnPluginStartStatusOK
}

func (p *pluginContext) defineMetrics() {
	for f := Fault(0); f < numFaults; f++ {
		p.faults[f] = proxywasm.DefineCounterMetric("stategate.fault." + f.String())
	}
	p.allowed = proxywasm.DefineCounterMetric("stategate.calls_allowed")
	p.denied = proxywasm.DefineCounterMetric("stategate.calls_denied")
	p.local = proxywasm.DefineCounterMetric("stategate.requests_rejected")
	p.listsDecorated = proxywasm.DefineCounterMetric("stategate.lists_decorated")
	p.listChangedSent = proxywasm.DefineCounterMetric("stategate.list_changed_sent")
	p.casConflicts = proxywasm.DefineCounterMetric("stategate.cas_conflicts")
	p.metrics = true
}

func (p *pluginContext) count(m proxywasm.MetricCounter) {
	if p.metrics {
		m.Increment(1)
	}
}

func (p *pluginContext) NewHttpContext(uint32) types.HttpContext {
	return &httpContext{p: p}
}

// call runs one engine export on in, exactly as a Wasm host calls the plugin's export.
func (p *pluginContext) call(fn abi.Function, in []byte) []byte {
	return p.eng.AppendCall(make([]byte, 0, len(in)+256), fn, in)
}
