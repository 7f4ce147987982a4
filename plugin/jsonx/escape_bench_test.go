package jsonx

import (
	"strings"
	"testing"
)

// escapeBenchInputs are the strings the escaper benchmarks write: a tool description as
// most are (plain ASCII), one with line breaks and quotes, and one mostly not ASCII.
var escapeBenchInputs = []struct{ name, s string }{
	{"plain", strings.Repeat("Reads a file from the workspace and returns it. ", 8)},
	{"escapes", strings.Repeat("line \"one\"\n\tline two\\ <b>&</b>\r\n", 12)},
	{"unicode", strings.Repeat("Ärger über Öl – “quoted” 日本語\u2028 ", 10)},
}

// BenchmarkEscape writes each input as a JSON string the two ways this package does:
// AppendString (the engine's output) and the canonical form (RFC 8785's escapes).
func BenchmarkEscape(b *testing.B) {
	for _, in := range escapeBenchInputs {
		buf := make([]byte, 0, 4*len(in.s))
		b.Run("AppendString/"+in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.s)))
			for b.Loop() {
				buf = AppendString(buf[:0], in.s)
			}
		})
		b.Run("canonical/"+in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.s)))
			for b.Loop() {
				buf = appendCanonicalString(buf[:0], in.s)
			}
		})
	}
}
