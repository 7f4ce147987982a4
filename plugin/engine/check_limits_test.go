package engine

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stategate/stategate/abi"
)

// TestAppendTimeoutResult: the piece-by-piece TOOL_TIMEOUT result equals the plain form
// (the text and details built as strings, then AppendErrorResult) for any tool name,
// invalid UTF-8 and characters that need escaping included, and is valid JSON.
func TestAppendTimeoutResult(t *testing.T) {
	plain := func(tool string, ms int) []byte {
		text := "Tool " + tool + " did not answer within " + itoa(ms) + " ms, and the gateway stopped waiting. It may or may not have completed: check its effect before calling it again."
		return AppendErrorResult(nil, abi.DenyToolTimeout, text, `{"tool":`+quote(tool)+`,"timeoutMs":`+itoa(ms)+`}`)
	}
	for _, tool := range []string{"cart.pay", "", `a"b\c`, "t\x00\x1f\x7f", "bad\xff\xfe", "\xe2\x82", "é\u2028ü", "x\xe2"} {
		for _, ms := range []int{0, 1, 30000, 1 << 40} {
			got := AppendTimeoutResult([]byte("pre"), tool, ms)
			if want := append([]byte("pre"), plain(tool, ms)...); !bytes.Equal(got, want) {
				t.Errorf("tool %q, %d ms:\n got %s\nwant %s", tool, ms, got, want)
			}
			if !json.Valid(got[3:]) {
				t.Errorf("tool %q: not valid JSON: %s", tool, got)
			}
		}
	}
}

func FuzzAppendTimeoutResult(f *testing.F) {
	f.Add("cart.pay", 30000)
	f.Add("bad\xff", 1)
	f.Fuzz(func(t *testing.T, tool string, ms int) {
		text := "Tool " + tool + " did not answer within " + itoa(ms) + " ms, and the gateway stopped waiting. It may or may not have completed: check its effect before calling it again."
		want := AppendErrorResult(nil, abi.DenyToolTimeout, text, `{"tool":`+quote(tool)+`,"timeoutMs":`+itoa(ms)+`}`)
		if got := AppendTimeoutResult(nil, tool, ms); !bytes.Equal(got, want) {
			t.Fatalf("tool %q, %d ms:\n got %s\nwant %s", tool, ms, got, want)
		}
	})
}
