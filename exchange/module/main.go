//go:build wasip1

// Command module is the exchange module (build/stategate-exchange.wasm, `make
// build.exchange`): the engine and the MCP exchange core (exchange/, exchange/flow) in one
// Extism plugin, so that a host is an HTTP listener, an HTTP client, a map with
// compare-and-set and a loop of calls (abi/ABI.md, "The exchange exports"). It keeps the
// engine module's exports too. Built by TinyGo only.
package main

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/extism/go-pdk"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

func main() {}

// The engine, the core and the flow are built on the first call, from the Extism config
// keys abi.ConfigKey and "exchange", and kept for the life of the instance.
var (
	eng    *engine.Engine
	engErr []byte
	cfgRaw []byte
	ready  bool

	core  *exchange.Core
	flw   *flow.Flow
	state = &kvstate.State{KV: hostKV{}}
	opts  = exchangeOptions{MaxBodyBytes: 16 << 20, LeaseWaitMs: 5000}
)

// exchangeOptions are the "exchange" config key's members.
type exchangeOptions struct {
	MaxBodyBytes   int
	LeaseWaitMs    int
	AllowedOrigins []string
	AllowedHosts   []string
	Loopback       bool
	OAuth          exchange.OAuthMap // publicUrl, and upstream's path (OAuth discovery)
	Upstream       bool              // upstream given: OAuth discovery and rewriting on (oauthMap)
}

func load() {
	if ready {
		return
	}
	ready = true
	reserve = make([]byte, 4<<20) // heap kept as free space (plugin/main.go, growHeap)
	reserve = nil
	cfg, _ := pdk.GetConfig(abi.ConfigKey)
	cfgRaw = []byte(cfg)
	e, err := engine.New(cfgRaw)
	if err != nil {
		engErr = engine.ConfigError(err)
		return
	}
	eng = e
	if x, ok := pdk.GetConfig("exchange"); ok && gjson.Valid(x) {
		o := gjson.Parse(x)
		if n := o.Get("maxBodyBytes").Int(); n > 0 && n <= 1<<30 {
			opts.MaxBodyBytes = int(n)
		}
		if n := o.Get("leaseWaitMs").Int(); n > 0 && n <= 600000 {
			opts.LeaseWaitMs = int(n)
		}
		o.Get("allowedOrigins").ForEach(func(_, v gjson.Result) bool {
			opts.AllowedOrigins = append(opts.AllowedOrigins, v.String())
			return true
		})
		o.Get("allowedHosts").ForEach(func(_, v gjson.Result) bool {
			opts.AllowedHosts = append(opts.AllowedHosts, v.String())
			return true
		})
		opts.Loopback = o.Get("loopback").Bool()
		if err := oauthOptions(o); err != nil {
			engErr = engine.ConfigError(err)
			return
		}
	}
	wait := time.Duration(opts.LeaseWaitMs) * time.Millisecond
	core = exchange.New(exchange.Options{Plugin: inProcess{}, State: state, Reporter: reporter{}, Config: cfgRaw,
		MaxBodyBytes: opts.MaxBodyBytes, LeaseWait: wait,
		NewCache: func(l cache.Limits) cache.Cache { return cache.NewMemory(l, nil) },
		Notify: func(except string, msg []byte) {
			notices = append(notices, flow.Notice{Except: except, Msg: msg, Broadcast: true})
		}})
	flw = flow.New(flow.Options{Core: core, MaxBodyBytes: opts.MaxBodyBytes, LeaseWait: wait,
		Origins: admission.OriginPolicy{AllowedOrigins: opts.AllowedOrigins, AllowedHosts: opts.AllowedHosts, Loopback: opts.Loopback},
		Busy:    state.TakeBusy, OAuth: oauthMap(),
		Notify: func(n flow.Notice) { notices = append(notices, n) }})
}

// oauthOptions reads publicUrl (the origin clients reach the host at: discovery documents
// and challenges name it) and upstream (the MCP server's URL, as the host sends to: its
// path is the endpoint the path-suffixed documents map onto), both optional; publicUrl
// takes effect with upstream only (oauthMap).
func oauthOptions(o gjson.Result) error {
	if v := o.Get("publicUrl"); v.Exists() {
		p, err := exchange.ParsePublicURL(v.String())
		if v.Type != gjson.String || err != nil {
			return errors.New("exchange option publicUrl: must be an http(s) origin (scheme://host[:port])")
		}
		opts.OAuth.Public = p
	}
	if v := o.Get("upstream"); v.Exists() {
		u, err := url.Parse(v.String())
		if v.Type != gjson.String || err != nil || !u.IsAbs() || u.Host == "" {
			return errors.New("exchange option upstream: must be the MCP server's absolute URL")
		}
		opts.OAuth.EndpointPath, opts.Upstream = u.Path, true
	}
	return nil
}

// oauthMap is the flow's OAuth option: discovery and its rewriting only with upstream
// known, since a forward with origin sends a path at the upstream's origin; without it
// publicUrl changes nothing (documents and challenges pass as any answer).
func oauthMap() *exchange.OAuthMap {
	if !opts.Upstream {
		return nil
	}
	return &opts.OAuth
}

var reserve []byte

// inProcess is the engine called directly, as the engine module's exports call it.
type inProcess struct{}

func (inProcess) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	return eng.AppendCall(nil, fn, in), nil
}

func engineCall(fn abi.Function) int32 {
	load()
	in := pdk.Input()
	if eng == nil {
		if fn == abi.FuncCheckConfig {
			pdk.Output(engine.CheckConfig(cfgRaw))
		} else {
			pdk.Output(engErr)
		}
		return 0
	}
	pdk.Output(eng.AppendCall(nil, fn, in))
	return 0
}

//go:wasmexport decorate_tools
func decorateTools() int32 { return engineCall(abi.FuncDecorateTools) }

//go:wasmexport decorate_result
func decorateResult() int32 { return engineCall(abi.FuncDecorateResult) }

//go:wasmexport transition
func transition() int32 { return engineCall(abi.FuncTransition) }

//go:wasmexport check_limits
func checkLimits() int32 { return engineCall(abi.FuncCheckLimits) }

//go:wasmexport check_config
func checkConfig() int32 { return engineCall(abi.FuncCheckConfig) }

//go:wasmexport tool_health
func toolHealth() int32 { return engineCall(abi.FuncToolHealth) }
