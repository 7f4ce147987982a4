package admission

import "testing"

func TestCanonicalNumber(t *testing.T) {
	same := [][]string{{"42", "42.0", "4.2e1", "4.2E+1", "420e-1", "42.000"}, {"0", "-0", "0.0", "0e5"}, {"-7", "-7.0", "-0.7e1"}, {"0.5", "5e-1", "50E-2"}}
	for _, g := range same {
		want, ok := canonicalNumber(g[0])
		if !ok {
			t.Fatalf("%q not a number", g[0])
		}
		for _, s := range g[1:] {
			if got, ok := canonicalNumber(s); !ok || got != want {
				t.Errorf("%q: %q %v, want %q", s, got, ok, want)
			}
		}
	}
	if a, _ := canonicalNumber("9007199254740993"); a == func() string { b, _ := canonicalNumber("9007199254740992"); return b }() {
		t.Error("2^53+1 equals 2^53")
	}
	for _, s := range []string{"", "+1", "0x10", "1_0", " 1", "1 ", "01", "1.", ".5", "1e", "1e+", "--1", "NaN", "Infinity", "1e9999999", "١"} {
		if got, ok := canonicalNumber(s); ok {
			t.Errorf("%q read as a number (%q)", s, got)
		}
	}
}

func TestDecodeHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"us-west1":                            "us-west1",
		"=?base64?SGVsbG8sIOS4lueVjA==?=":     "Hello, 世界",
		"=?base64?IHBhZGRlZCA=?=":             " padded ",
		"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=": "=?base64?literal?=",
	} {
		if got, ok := DecodeHeaderValue(in); !ok || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"caf\xc3\xa9", "a\x00b", "=?base64?!!?=", "=?base64?/w==?="} {
		if got, ok := DecodeHeaderValue(in); ok {
			t.Errorf("%q accepted as %q", in, got)
		}
	}
}
