package exchange

import (
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// TestDecorated_sameAsAReader: decorated (decorate_result's answer split without a walk of
// its message) gives the message and the invalidation a JSON reader gives, whatever the
// message holds (the member's own name in its text, escaped quotes, a cut message), and
// reads an answer of another shape member by member.
func TestDecorated_sameAsAReader(t *testing.T) {
	e, err := engine.New(exchangetest.Config("sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{`ok`, `,\"invalidated\":{\"patterns\":[]}`, `\\`, `a\"b`}
	big := make([]byte, 70_000) // over the sample's maxResponseBytes: cut
	for i := range big {
		big[i] = 'y'
	}
	texts = append(texts, string(big))
	var answers [][]byte
	for _, tool := range []string{"tasks.update", "tasks.get", "cart.add_item"} {
		for _, text := range texts {
			for _, tail := range []string{``, `,"_meta":{"m":",\"invalidated\":{"}`, `,"isError":true`} {
				in := `{"tool":"` + tool + `","message":{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + text + `"}]` + tail + `}} }`
				answers = append(answers, e.AppendCall(nil, abi.FuncDecorateResult, []byte(in)))
			}
		}
	}
	answers = append(answers, []byte(`{"error":{"code":"INVALID_INPUT","message":"x"}}`), []byte(`{"needState":["k"]}`),
		[]byte(` {"message" : {"a":1} , "invalidated":{"patterns":["p"],"tools":[]},"truncated":null}`))
	blocks, cut := 0, 0
	for _, res := range answers {
		if gjson.GetBytes(res, "invalidated.patterns.0").Exists() {
			blocks++
		}
		if gjson.GetBytes(res, "truncated.limitBytes").Exists() {
			cut++
		}
		msg, ans := decorated(res)
		ref := gjson.ParseBytes(res)
		if string(msg) != ref.Get("message").Raw {
			t.Errorf("%.200s: message %.200s; want %.200s", res, msg, ref.Get("message").Raw)
		}
		for _, path := range []string{"invalidated", "invalidated.patterns", "invalidated.tools"} {
			if got, want := ans.Get(path).Raw, ref.Get(path).Raw; got != want {
				t.Errorf("%.200s: %s %s; want %s", res, path, got, want)
			}
		}
	}
	if blocks == 0 || cut == 0 {
		t.Fatalf("%d answers with a block, %d cut: the inputs do not exercise decorate_result", blocks, cut)
	}
}
