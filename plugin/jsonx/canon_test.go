package jsonx

import (
	"testing"

	"github.com/tidwall/gjson"
)

func canon(t *testing.T, in string) string {
	t.Helper()
	out, err := AppendCanonical(nil, gjson.Parse(in))
	if err != nil {
		t.Fatalf("AppendCanonical(%s): %v", in, err)
	}
	return string(out)
}

// TestCanonicalNumbers: the ECMAScript number forms of RFC 8785 (section 3.2.2.3 and its
// appendix B sample values).
func TestCanonicalNumbers(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "1": "1", "-1": "-1", "1.0": "1", "1e0": "1", "100": "100",
		"1.5": "1.5", "0.000001": "0.000001", "0.0000001": "1e-7", "1e21": "1e+21",
		"1e20": "100000000000000000000", "123456789012345678901": "123456789012345680000",
		"4.50": "4.5", "2e-3": "0.002", "0.000001234": "0.000001234",
		"1.7976931348623157e308": "1.7976931348623157e+308", "5e-324": "5e-324",
		"9007199254740993": "9007199254740992", "-1.5e-10": "-1.5e-10", "333333333.3333333": "333333333.3333333",
		"1e+23": "1e+23", "295147905179352830000": "295147905179352830000",
	} {
		if got := canon(t, in); got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
	if _, err := AppendCanonical(nil, gjson.Parse("1e400")); err == nil {
		t.Error("1e400 (out of float64 range) has a canonical form")
	}
}

func TestCanonicalDocuments(t *testing.T) {
	for in, want := range map[string]string{
		`{"b":1,"a":2}`: `{"a":2,"b":1}`,
		` { "a" : [ 1 , 2.0 , {"z":null,"y":true} ] } `: `{"a":[1,2,{"y":true,"z":null}]}`,
		`"\u0041\/\u00e9\b\f\u001f\u2028"`:              "\"A/\u00e9\\b\\f\\u001f\u2028\"",
		// UTF-16 order: U+1F600 (surrogates D83D DE00) sorts before U+E000, unlike in
		// UTF-8 byte order.
		`{"\ue000":1,"\ud83d\ude00":2}`: "{\"\U0001F600\":2,\"\ue000\":1}",
	} {
		if got := canon(t, in); got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `{"a":{"b":1,"\u0062":2}}`} {
		if _, err := AppendCanonical(nil, gjson.Parse(bad)); err == nil {
			t.Errorf("%s: a repeated member has a canonical form", bad)
		}
	}
}
