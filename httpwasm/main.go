//go:build tinygo

// Command httpwasm is the http-wasm build of the MCP exchange (build/stategate-httpwasm.wasm,
// `make build.httpwasm`): the engine and the exchange core behind http-wasm's
// handle_request and handle_response, for Traefik's and Dapr's http-wasm middleware
// (examples/traefik, examples/dapr). It is a command module (TinyGo
// -buildmode=wasi-legacy): main runs from _start, which both hosts call, and the exports
// stay callable after it. A configuration the build cannot honour makes _start exit with
// status 1 after logging why, so the host refuses to load the plugin. Built by TinyGo
// only; the logic is httpwasm/guest.
package main

import (
	"crypto/rand"
	"os"
	"strconv"

	"github.com/http-wasm/http-wasm-guest-tinygo/handler"
	"github.com/http-wasm/http-wasm-guest-tinygo/handler/api"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/httpwasm/entropy"
	"github.com/stategate/stategate/httpwasm/filestate"
	"github.com/stategate/stategate/httpwasm/guest"
	"github.com/tidwall/gjson"
)

func main() {
	growHeap()
	cfg := handler.Host.GetConfig()
	unique := seed(cfg)
	g, err := guest.Load(cfg, handler.Host, guest.MemKV{}, func(path string) (kvstate.KV, error) {
		return filestate.Open(path, unique)
	})
	if err != nil {
		handler.Host.Log(api.LogLevelError, err.Error())
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	handler.HandleRequestFn = g.HandleRequest
	handler.HandleResponseFn = g.HandleResponse
}

// heapReserve is heap taken once and given back at once, so that TinyGo keeps it as free
// space: without room to spare, the heap is collected on nearly every request (as in the
// engine module, plugin/main.go).
const heapReserve = 4 << 20

var reserve []byte

func growHeap() {
	reserve = make([]byte, heapReserve)
	reserve = nil
}

// seed replaces crypto/rand's reader, which every id the core mints reads (gateway
// sessions, lease tokens, the key that folds credentials into cache keys), by one seeded
// from every source the guest has: the host's random_get (Traefik gives wazero's default,
// the same fixed sequence in every instance), the wall clock, /dev/urandom when the host
// mounts it, STATEGATE_SECRET when the host forwards it, and an instance number drawn from
// the state directory, so that no two instances ever mint the same ids. It returns this
// instance's unique name for temporary files.
func seed(cfg []byte) string {
	var inputs [][]byte
	var b [32]byte
	if _, err := rand.Read(b[:]); err == nil {
		inputs = append(inputs, b[:])
	}
	if u, err := os.Open("/dev/urandom"); err == nil {
		var ub [32]byte
		if n, _ := u.Read(ub[:]); n > 0 {
			inputs = append(inputs, ub[:n])
		}
		u.Close()
	}
	if s := os.Getenv("STATEGATE_SECRET"); s != "" {
		inputs = append(inputs, []byte(s))
	}
	instance := ""
	if dir := gjson.GetBytes(cfg, guest.OptionsMember+".stateDir"); dir.Type == gjson.String && dir.Str != "" {
		if n, ok := entropy.Instance(dir.Str); ok {
			instance = strconv.FormatUint(n, 10)
			inputs = append(inputs, []byte("instance "+instance))
		}
	}
	r := entropy.New(inputs...)
	rand.Reader = r
	var tag [6]byte
	r.Read(tag[:])
	const hexd = "0123456789abcdef"
	name := []byte("i" + instance + "-")
	for _, c := range tag {
		name = append(name, hexd[c>>4], hexd[c&15])
	}
	return string(name)
}
