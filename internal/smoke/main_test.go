package smoke

import (
	"context"
	"os"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host"
	"github.com/stategate/stategate/plugin/engine"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	cfg, _ := os.ReadFile("/work/main/abi/testdata/config/sample.json")
	inputs := []struct {
		fn abi.Function
		in string
	}{
		{abi.FuncDecorateTools, `{"message":{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"countries.list","description":"List countries"},{"name":"tasks.update","inputSchema":{}},{"name":"cart.pay","description":"Pay [Cache-Control: no-store]"}],"nextCursor":"abc"}},"session":"s1"}`},
		{abi.FuncDecorateTools, `{"message":{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"countries.list","description":"List countries"},{"name":"tasks.update","inputSchema":{}},{"name":"cart.pay","description":"Pay [Cache-Control: no-store]"}],"nextCursor":"abc"}},"session":"s1","states":{"stategate/v1/checkout/session//s1":null}}`},
		{abi.FuncDecorateResult, `{"tool":"tasks.update","message":{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"ok"}]}},"knownTools":["tasks.list","sprints.list","countries.list"]}`},
		{abi.FuncCheckLimits, `{"tool":"cart.pay","session":"s1","states":{"stategate/v1/checkout/session//s1":null}}`},
		{abi.FuncCheckLimits, `{"tool":"bulk.import","arguments":{"orders":[{"lines":[1,2,3]}]}}`},
		{abi.FuncTransition, `{"tool":"cart.add_item","session":"s1","states":{"stategate/v1/checkout/session//s1":null}}`},
		{abi.FuncCheckConfig, `{}`},
		{abi.FuncCheckLimits, `{"tool":`},
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"/work/main/build/stategate.wasm", "/work/main/build/stategate-go.wasm"} {
		wasm, _ := os.ReadFile(file)
		rt, err := host.New(ctx, wasm, host.Options{})
		if err != nil {
			t.Fatal(err)
		}
		inst, err := rt.Instantiate(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range inputs {
			want := eng.Call(c.fn, []byte(c.in))
			got, err := inst.Call(ctx, c.fn, []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			got2, err := inst.CallExtism(ctx, c.fn, []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) || string(got2) != string(want) {
				t.Errorf("%s %s:\nnative %s\nraw    %s\nextism %s", file, c.fn.Name(), want, got, got2)
			}
			t.Logf("%s -> %s", c.fn.Name(), want)
		}
	}
}
