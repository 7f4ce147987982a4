package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain ASCII is unchanged", "cart.pay", "cart.pay"},
		{"printable non-ASCII is unchanged", "café_日本", "café_日本"},
		{"OSC title and SGR colour", "\x1b]0;pwned\x07evil\x1b[31m", `\x1b]0;pwned\x07evil\x1b[31m`},
		{"carriage return overwrites no line", "ok\rFAILED", `ok\rFAILED`},
		{"tab and line feed", "a\tb\nc", `a\tb\nc`},
		{"NUL and DEL", "a\x00b\x7f", `a\x00b\x7f`},
		{"C1 CSI", "a\u009b31m", `a\u009b31m`},
		{"right-to-left override", "evil\u202egpj.exe", `evil\u202egpj.exe`},
		{"bidi isolates", "\u2066a\u2069", `\u2066a\u2069`},
		{"zero-width space and BOM", "a\u200bb\ufeff", `a\u200bb\ufeff`},
		{"not UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"backslash doubled", `a\x1b`, `a\\x1b`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := String(c.in); got != c.want {
				t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	if got := Lines("one\ntwo\x1b[2J\r \\u001b"); got != "one\ntwo\\x1b[2J\\r \\u001b" {
		t.Errorf("Lines kept or escaped the wrong characters: %q", got)
	}
}

// TestString_noRawControls: whatever the input, the output holds no character Control
// reports, and no byte that is not UTF-8; distinct inputs render distinctly.
func TestString_noRawControls(t *testing.T) {
	seen := map[string]string{}
	var inputs []string
	for r := rune(0); r < 0x3000; r++ {
		inputs = append(inputs, "x"+string(r)+"y")
	}
	for b := 0x80; b < 0x100; b++ {
		inputs = append(inputs, "x"+string([]byte{byte(b)})+"y")
	}
	inputs = append(inputs, `x\u202ey`, `x\x1by`, "x\ufeffy", "x\ufff9y")
	for _, in := range inputs {
		out := String(in)
		if !utf8.ValidString(out) || strings.IndexFunc(out, Control) >= 0 {
			t.Fatalf("String(%q) = %q holds a raw control", in, out)
		}
		if prev, ok := seen[out]; ok && prev != in {
			t.Fatalf("String(%q) and String(%q) both render %q", prev, in, out)
		}
		seen[out] = in
	}
}

func TestString_unchangedDoesNotAllocate(t *testing.T) {
	s := "github__create_issue"
	if n := testing.AllocsPerRun(100, func() { _ = String(s) }); n != 0 {
		t.Errorf("String allocated %v times on plain text", n)
	}
}

// TestJSON: the rendered JSON has no raw control characters and decodes to the same value.
func TestJSON(t *testing.T) {
	v := map[string]any{"tool": "\x1b]0;pwned\x07evil\x1b[31m", "reason": "a\rb\u009b\u202e\x7f", "n": 1}
	raw, _ := json.Marshal(v)
	raw = append(raw, '\n')
	out := JSON(raw)
	if strings.IndexFunc(strings.TrimSuffix(string(out), "\n"), Control) >= 0 {
		t.Fatalf("JSON left a raw control: %q", out)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil || back["tool"] != v["tool"] || back["reason"] != v["reason"] {
		t.Fatalf("JSON changed the value: %q -> %v %v", out, back, err)
	}
	plain := []byte(`{"a":"b"}` + "\n")
	if got := JSON(plain); &got[0] != &plain[0] {
		t.Error("JSON copied a text with nothing to escape")
	}
}
