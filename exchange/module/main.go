//go:build wasip1

// Command module is the exchange module (build/stategate-exchange.wasm, `make
// build.exchange`): the engine and the MCP exchange core (exchange/, exchange/flow) in one
// Extism plugin, so that a host is an HTTP listener, an HTTP client, a map with
// compare-and-set and a loop of calls (abi/ABI.md, "The exchange exports"). It keeps the
// engine module's exports too, and its raw and stdio entries (plugin/exports), which
// answer the exchange exports as well. Built by TinyGo only.
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
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/plugin/exports"
	"github.com/tidwall/gjson"
)

func main() {}

// The core and the flow are built once the engine is (plugin/exports, which holds the
// engine and the engine's exports), from the Extism config key "exchange", and kept for the
// life of the instance. failed is the answer of every http_request when they could not be.
var (
	core   *exchange.Core
	flw    *flow.Flow
	failed []byte
	state  = &kvstate.State{KV: hostKV{}}
	opts   = exchangeOptions{MaxBodyBytes: 16 << 20, LeaseWaitMs: 5000}
)

// exchangeOptions are the "exchange" config key's members.
type exchangeOptions struct {
	MaxBodyBytes   int
	LeaseWaitMs    int
	AllowedOrigins []string
	AllowedHosts   []string
	Loopback       bool
	OAuth          oauth.Map // publicUrl, and upstream's path (OAuth discovery)
	Upstream       bool      // upstream given: OAuth discovery and rewriting on (oauthMap)
}

func init() {
	exports.OnLoad(load)
	exports.Register(abi.FuncHTTPRequest, httpRequest)
	exports.Register(abi.FuncHTTPAnswer, httpAnswer)
	exports.Register(abi.FuncHTTPTimeout, httpTimeout)
}

// The exchange exports, answered by every entry of plugin/exports (Extism, raw, stdio).

//go:wasmexport http_request
func httpRequestExport() int32 { return exports.Extism(abi.FuncHTTPRequest) }

//go:wasmexport http_answer
func httpAnswerExport() int32 { return exports.Extism(abi.FuncHTTPAnswer) }

//go:wasmexport http_timeout
func httpTimeoutExport() int32 { return exports.Extism(abi.FuncHTTPTimeout) }

// load builds the core and the flow (exports.Load runs it once the engine is built).
func load() {
	cfgRaw := exports.Config()
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
			failed = engine.ConfigError(err)
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
		p, err := oauth.ParsePublicURL(v.String())
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
func oauthMap() *oauth.Map {
	if !opts.Upstream {
		return nil
	}
	return &opts.OAuth
}

// inProcess is the engine called directly, as the engine's exports call it.
type inProcess struct{}

func (inProcess) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	return exports.Engine().AppendCall(nil, fn, in), nil
}
