// Command prof runs one engine export many times on the benchmark inputs, so the engine
// can be profiled as TinyGo builds it (same compiler, garbage collector and escape
// analysis as the wasm module) with native tools:
//
//	tinygo build -o /tmp/prof -gc=conservative -scheduler=none ./plugin/internal/prof
//	valgrind --tool=callgrind /tmp/prof decorate_tools 200
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: prof decorate_tools|decorate_result|check_limits N [config.json]")
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Args[2])
	cfgPath := "abi/testdata/config/sample.json"
	if len(os.Args) > 3 {
		cfgPath = os.Args[3]
	}
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var fn abi.Function
	var in []byte
	switch os.Args[1] {
	case "decorate_tools":
		fn, in = abi.FuncDecorateTools, toolsList(1000)
	case "decorate_result":
		fn, in = abi.FuncDecorateResult, callResult(1<<20)
	case "check_limits":
		fn, in = abi.FuncCheckLimits, checkInput()
	default:
		fmt.Fprintln(os.Stderr, "unknown export", os.Args[1])
		os.Exit(2)
	}
	var out []byte
	out = eng.AppendCall(out[:0], fn, in)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		out = eng.AppendCall(out[:0], fn, in)
	}
	runtime.ReadMemStats(&after)
	fmt.Fprintf(os.Stderr, "%s: %d bytes out; per call %d allocations, %d bytes; %d collections in %d calls\n",
		os.Args[1], len(out), (after.Mallocs-before.Mallocs)/uint64(n), (after.TotalAlloc-before.TotalAlloc)/uint64(n), after.NumGC-before.NumGC, n)
}

func toolsList(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	groups := []string{"tasks", "sprints", "countries", "cart", "users", "reports"}
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		g := groups[i%len(groups)]
		is := strconv.Itoa(i)
		sb.WriteString(`{"name":"` + g + `.op` + is + `","title":"Operation ` + is + `","description":"Does operation ` + is + ` on ` + g + `. Returns the affected records.",` +
			`"inputSchema":{"type":"object","properties":{"id":{"type":"string","description":"Record id"},"limit":{"type":"integer"}},"required":["id"]},` +
			`"annotations":{"readOnlyHint":` + strconv.FormatBool(i%2 == 0) + `}}`)
	}
	sb.WriteString(`],"nextCursor":"next-page"}}`)
	return []byte(`{"message":` + sb.String() + `,"session":"s1","states":{"stategate/v1/checkout/session//s1":null}}`)
}

func callResult(size int) []byte {
	text := strings.Repeat("All work and no play makes Jack a dull boy. ", size/44+1)[:size]
	return []byte(`{"tool":"tasks.update","message":{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"` + text + `"}]}}}`)
}

func checkInput() []byte {
	items := make([]string, 60)
	for i := range items {
		items[i] = `"sku-` + fmt.Sprintf("%04d", i) + `"`
	}
	return []byte(`{"tool":"orders.submit","arguments":{"customer":"c-42","items":[` + strings.Join(items, ",") + `],"note":"leave at the door"},"session":"s1"}`)
}
