package filter

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

func toolsList(n int) string {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		name := "tasks.t" + strconv.Itoa(i)
		switch i % 4 {
		case 1:
			name = "countries.c" + strconv.Itoa(i)
		case 2:
			name = "cart.add_item"
		}
		b.WriteString(`{"name":"` + name + `","description":"Tool number ` + strconv.Itoa(i) + ` does something useful.","inputSchema":{"type":"object","properties":{"id":{"type":"string"}}}}`)
	}
	b.WriteString(`]}}`)
	return b.String()
}

// BenchmarkFilter is the filter's per-request cost under proxytest: every callback of one
// request and its response, shared data included, natively and through the built .wasm
// on wazero.
func BenchmarkFilter(b *testing.B) {
	list := toolsList(1000)
	cases := []struct {
		name string
		x    roundTrip
	}{
		{"tools_list_1000_tools", roundTrip{headers: session("s1"), body: []string{rpc(1, "tools/list", "")}, respHeaders: jsonResp, respBody: []string{list}}},
		{"tools_call", roundTrip{headers: session("s1"), body: []string{call(1, "cart.add_item", `{"sku":"A1","qty":2}`)}, respHeaders: jsonResp, respBody: []string{okResult(1, "added")}}},
		{"tools_call_denied", roundTrip{headers: session("s1"), body: []string{call(1, "cart.pay", `{}`)}}},
	}
	for _, c := range cases {
		for _, r := range runners {
			b.Run(c.name+"/"+r.name, func(b *testing.B) {
				e := newEnv(b, r.vm(b), sampleConfig, nil)
				b.SetBytes(int64(len(c.x.body[0]) + len(strings.Join(c.x.respBody, ""))))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					e.do(c.x)
				}
			})
		}
	}
}

// BenchmarkEngine is the engine alone on the same inputs: the floor under the filter.
func BenchmarkEngine(b *testing.B) {
	eng, err := engine.New(sampleConfig)
	if err != nil {
		b.Fatal(err)
	}
	states := `,"states":{"` + sessionKey + `":null}`
	cases := []struct {
		name string
		fn   abi.Function
		in   string
	}{
		{"decorate_tools_1000_tools", abi.FuncDecorateTools, `{"message":` + toolsList(1000) + `,"session":"s1","protocolVersion":"2025-06-18"` + states + `}`},
		{"check_limits", abi.FuncCheckLimits, `{"tool":"cart.add_item","arguments":{"sku":"A1","qty":2},"session":"s1"` + states + `}`},
		{"transition", abi.FuncTransition, `{"tool":"cart.add_item","arguments":{"sku":"A1","qty":2},"session":"s1"` + states + `}`},
		{"decorate_result", abi.FuncDecorateResult, `{"tool":"cart.add_item","message":` + okResult(1, "added") + `}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			in := []byte(c.in)
			var buf []byte
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				buf = eng.AppendCall(buf[:0], c.fn, in)
			}
		})
	}
}
