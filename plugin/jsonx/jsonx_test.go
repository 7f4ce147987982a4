package jsonx

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		valid bool
	}{
		// top-level scalars
		{name: "null", in: `null`, valid: true},
		{name: "true", in: `true`, valid: true},
		{name: "false", in: `false`, valid: true},
		{name: "string", in: `"x"`, valid: true},
		{name: "number", in: `0`, valid: true},
		{name: "whitespace_around", in: " \t\r\n{} \t\r\n", valid: true},
		{name: "truncated_literal", in: `tru`},
		{name: "misspelt_literal", in: `nul1`},
		{name: "literal_with_suffix", in: `truex`},
		{name: "capitalised_literal", in: `True`},

		// numbers
		{name: "negative_zero", in: `-0`, valid: true},
		{name: "exponent", in: `1e5`, valid: true},
		{name: "exponent_upper_signed", in: `1E+5`, valid: true},
		{name: "exponent_negative", in: `-1.5e-10`, valid: true},
		{name: "fraction", in: `0.5`, valid: true},
		{name: "big_integer", in: `123456789012345678901234567890`, valid: true},
		{name: "dot_exponent", in: `1.e5`},
		{name: "trailing_dot", in: `1.`},
		{name: "leading_dot", in: `.5`},
		{name: "leading_zero", in: `01`},
		{name: "negative_leading_zero", in: `-01`},
		{name: "leading_plus", in: `+1`},
		{name: "lone_minus", in: `-`},
		{name: "minus_dot", in: `-.5`},
		{name: "empty_exponent", in: `1e`},
		{name: "signed_empty_exponent", in: `1e+`},
		{name: "hex", in: `0x10`},
		{name: "infinity", in: `Infinity`},
		{name: "nan", in: `NaN`},
		{name: "number_then_letter", in: `1a`},
		{name: "number_in_array", in: `[0,-0,1e5,2.5E-3]`, valid: true},
		{name: "leading_zero_in_array", in: `[00]`},

		// structure
		{name: "empty_object", in: `{}`, valid: true},
		{name: "empty_array", in: `[]`, valid: true},
		{name: "nested", in: `{"a":[1,{"b":null},[]],"c":{}}`, valid: true},
		{name: "array_trailing_comma", in: `[1,]`},
		{name: "object_trailing_comma", in: `{"a":1,}`},
		{name: "leading_comma", in: `[,1]`},
		{name: "double_comma", in: `[1,,2]`},
		{name: "missing_comma", in: `[1 2]`},
		{name: "missing_colon", in: `{"a" 1}`},
		{name: "missing_value", in: `{"a":}`},
		{name: "unquoted_key", in: `{a:1}`},
		{name: "number_key", in: `{1:1}`},
		{name: "single_quotes", in: `{'a':1}`},
		{name: "mismatched_close", in: `[}`},
		{name: "mismatched_close_object", in: `{"a":1]`},
		{name: "unclosed_array", in: `[1`},
		{name: "unclosed_object", in: `{"a":1`},
		{name: "unclosed_after_key", in: `{"a"`},
		{name: "unclosed_after_colon", in: `{"a":`},
		{name: "unclosed_after_comma", in: `[1,`},
		{name: "extra_close", in: `[]]`},
		{name: "colon_in_array", in: `[1:2]`},
		{name: "comment", in: `[1]//`},

		// strings
		{name: "escapes", in: `"\" \\ \/ \b \f \n \r \t \u00e9"`, valid: true},
		{name: "surrogate_pair", in: `"\ud83d\ude00"`, valid: true},
		{name: "lone_surrogate", in: `"\ud83d"`, valid: true},
		{name: "upper_hex", in: `"\uABCD"`, valid: true},
		{name: "utf8", in: `"héllo ✓ 😀"`, valid: true},
		{name: "del_unescaped", in: "\"\x7f\"", valid: true},
		{name: "raw_newline", in: "\"a\nb\""},
		{name: "raw_tab", in: "\"a\tb\""},
		{name: "raw_nul", in: "\"\x00\""},
		{name: "raw_unit_separator", in: "\"\x1f\""},
		{name: "bad_escape", in: `"\x41"`},
		{name: "bad_escape_quote", in: `"\'"`},
		{name: "short_unicode_escape", in: `"\u12"`},
		{name: "bad_hex_escape", in: `"\u12g4"`},
		{name: "escape_at_end", in: `"\`},
		{name: "unicode_escape_at_end", in: `"\u00`},
		{name: "unterminated", in: `"abc`},
		{name: "escaped_quote_unterminated", in: `"abc\"`},
		{name: "key_bad_escape", in: `{"\q":1}`},

		// documents
		{name: "empty", in: ``},
		{name: "only_whitespace", in: "  \n"},
		{name: "trailing_garbage", in: `{}x`},
		{name: "two_values", in: `1 2`},
		{name: "two_objects", in: `{}{}`},
		{name: "nul_after_value", in: "{}\x00"},
		{name: "byte_order_mark", in: "\ufeff{}"},
		{name: "form_feed_whitespace", in: "\f{}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate([]byte(tc.in), 64)
			if got := err == nil; got != tc.valid {
				t.Fatalf("Validate(%q) = %v, want valid=%v", tc.in, err, tc.valid)
			}
			if std := json.Valid([]byte(tc.in)); std != tc.valid {
				t.Fatalf("encoding/json.Valid(%q) = %v: the table is wrong", tc.in, std)
			}
			if err != nil {
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("error %T is not a *SyntaxError", err)
				}
				if se.Deep {
					t.Errorf("Deep set for a shallow document: %v", err)
				}
				if se.Offset < 0 || se.Offset > len(tc.in) {
					t.Errorf("offset %d outside the input (len %d)", se.Offset, len(tc.in))
				}
			}
		})
	}
}

func TestValidate_depth(t *testing.T) {
	const maxDepth = 100
	nested := func(open, close string, depth int) string {
		return strings.Repeat(open, depth) + strings.Repeat(close, depth)
	}
	tests := []struct {
		name string
		in   string
		deep bool // invalid because too deep
	}{
		{name: "arrays_at_max", in: nested("[", "]", maxDepth)},
		{name: "arrays_over_max", in: nested("[", "]", maxDepth+1), deep: true},
		{name: "objects_at_max", in: strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth)},
		{name: "objects_over_max", in: strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1), deep: true},
		{name: "mixed_at_max", in: strings.Repeat(`[{"a":`, maxDepth/2) + "1" + strings.Repeat("}]", maxDepth/2)},
		{name: "mixed_over_max", in: strings.Repeat(`[{"a":`, maxDepth/2) + "[]" + strings.Repeat("}]", maxDepth/2), deep: true},
		{name: "values_at_max", in: strings.Repeat("[", maxDepth) + "1" + strings.Repeat("]", maxDepth)},
		{name: "empty_container_over_max", in: strings.Repeat("[", maxDepth) + "{}" + strings.Repeat("]", maxDepth), deep: true},
		{name: "siblings_do_not_add_up", in: "[" + strings.Repeat(nested("[", "]", maxDepth-1)+",", 50) + "[]]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate([]byte(tc.in), maxDepth)
			if !tc.deep {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var se *SyntaxError
			if !errors.As(err, &se) || !se.Deep {
				t.Fatalf("Validate = %v, want a *SyntaxError with Deep", err)
			}
		})
	}
	t.Run("zero_depth_allows_scalars_only", func(t *testing.T) {
		if err := Validate([]byte(`"x"`), 0); err != nil {
			t.Errorf("scalar: %v", err)
		}
		var se *SyntaxError
		if err := Validate([]byte(`[]`), 0); !errors.As(err, &se) || !se.Deep {
			t.Errorf("empty array at depth 0 = %v, want Deep", err)
		}
	})
}

func TestValidate_veryDeep(t *testing.T) {
	const depth = 1_000_000
	inputs := map[string]string{
		"arrays":          strings.Repeat("[", depth),
		"arrays_closed":   strings.Repeat("[", depth) + strings.Repeat("]", depth),
		"objects":         strings.Repeat(`{"a":`, depth),
		"garbage_at_end":  strings.Repeat("[", depth) + "x",
		"unbalanced_tail": strings.Repeat("[", depth) + strings.Repeat("}", depth),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			err := Validate([]byte(in), 256)
			if err == nil {
				t.Fatal("Validate accepted a document deeper than maxDepth")
			}
			var se *SyntaxError
			if !errors.As(err, &se) || !se.Deep {
				t.Errorf("Validate = %v, want Deep", err)
			}
		})
	}
	t.Run("within_a_huge_bound", func(t *testing.T) {
		// With a bound above the depth the validator must still not recurse.
		in := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		if err := Validate([]byte(in), depth); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if err := Validate([]byte(in[:len(in)-1]), depth); err == nil {
			t.Fatal("Validate accepted an unclosed array")
		}
	})
}

func TestSyntaxError_Error(t *testing.T) {
	err := Validate([]byte(`[1,]`), 8)
	if got, want := err.Error(), `invalid character ']' at offset 3`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	err = Validate([]byte(`[[1]]`), 1)
	if got, want := err.Error(), `nesting deeper than 1 at offset 1`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// depthOf returns the nesting depth of data, counting brackets outside strings. It is
// exact for valid JSON and an upper bound otherwise, which is what FuzzValidate needs:
// when it is at most the bound, Validate must agree with encoding/json.
func depthOf(data []byte) int {
	depth, max := 0, 0
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			if depth > max {
				max = depth
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return max
}

func FuzzValidate(f *testing.F) {
	seeds := []string{
		``, `null`, `-0`, `1.e5`, `01`, `[1,]`, `{"a":1,}`, `"\ud83d\ude00"`, `"\u12"`,
		`{"a":[1,{"b":null},[]],"c":{}}`, "\"\x01\"", `{}x`, `[[[[]]]]`, `{"a":{"b":{"c":[]}}}`,
		`[1e+5,-0.25E-3,"x\"y"]`, `{"\\":"\/"}`, "\xff", "\"\xff\"", `[{"a"`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	const bound = 10000
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Validate(data, bound)
		if depthOf(data) <= bound {
			if got, want := err == nil, json.Valid(data); got != want {
				t.Fatalf("Validate(%q) = %v, encoding/json.Valid = %v", data, err, want)
			}
		}
		// A small bound may only turn valid documents into Deep errors.
		small := Validate(data, 3)
		var se *SyntaxError
		switch {
		case err != nil && small == nil:
			t.Fatalf("Validate(%q, 3) accepted what Validate(_, %d) rejects: %v", data, bound, err)
		case err == nil && small != nil && (!errors.As(small, &se) || !se.Deep):
			t.Fatalf("Validate(%q, 3) = %v, want nil or Deep", data, small)
		case err == nil && small == nil && depthOf(data) > 3:
			t.Fatalf("Validate(%q, 3) accepted depth %d", data, depthOf(data))
		}
	})
}

func TestAppendString(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty", in: "", want: `""`},
		{name: "plain", in: "hello", want: `"hello"`},
		{name: "quote_and_backslash", in: `a"b\c`, want: `"a\"b\\c"`},
		{name: "short_escapes", in: "\n\r\t", want: `"\n\r\t"`},
		{name: "other_controls", in: "\x00\x08\x0c\x1f", want: `"\u0000\u0008\u000c\u001f"`},
		{name: "html_kept", in: "<a&b>", want: `"<a&b>"`},
		{name: "slash_kept", in: "a/b", want: `"a/b"`},
		{name: "del_kept", in: "\x7f", want: "\"\x7f\""},
		{name: "utf8_kept", in: "é✓😀", want: `"é✓😀"`},
		{name: "line_separators", in: "a\u2028b\u2029c", want: `"a\u2028b\u2029c"`},
		{name: "invalid_byte", in: "a\xffb", want: "\"a\ufffdb\""},
		{name: "each_invalid_byte", in: "\xff\xfe", want: "\"\ufffd\ufffd\""},
		{name: "truncated_rune", in: "\xe2\x9c", want: "\"\ufffd\ufffd\""},
		{name: "encoded_surrogate", in: "\xed\xa0\x80", want: "\"\ufffd\ufffd\ufffd\""},
		{name: "replacement_char_kept", in: "\ufffd", want: "\"\ufffd\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(AppendString([]byte("x"), tc.in))
			if got != "x"+tc.want {
				t.Errorf("AppendString(%q) = %q, want %q", tc.in, got, "x"+tc.want)
			}
			if n := StringLen(tc.in); n != len(tc.want) {
				t.Errorf("StringLen(%q) = %d, want %d", tc.in, n, len(tc.want))
			}
		})
	}
}

func checkAppendString(t *testing.T, s string) {
	t.Helper()
	out := AppendString(nil, s)
	if err := Validate(out, 1); err != nil {
		t.Fatalf("AppendString(%q) = %q: not valid JSON: %v", s, out, err)
	}
	if !json.Valid(out) {
		t.Fatalf("AppendString(%q) = %q: encoding/json rejects it", s, out)
	}
	if !utf8.Valid(out) {
		t.Fatalf("AppendString(%q) = %q: not valid UTF-8", s, out)
	}
	var decoded string
	if err := json.Unmarshal(out, &decoded); err != nil {
		t.Fatalf("decoding %q: %v", out, err)
	}
	// Each invalid byte becomes one U+FFFD, as converting to runes does.
	if want := string([]rune(s)); decoded != want {
		t.Fatalf("AppendString(%q) decodes to %q, want %q", s, decoded, want)
	}
	if n := StringLen(s); n != len(out) {
		t.Fatalf("StringLen(%q) = %d, len(AppendString) = %d", s, n, len(out))
	}
}

func TestAppendString_allBytes(t *testing.T) {
	for c := 0; c < 256; c++ {
		checkAppendString(t, string([]byte{byte(c)}))
		checkAppendString(t, "a"+string([]byte{byte(c)})+"\u2028")
	}
	for r := rune(0); r < 0x3000; r++ {
		checkAppendString(t, string(r))
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "hello", `a"b\c`, "\n\r\t\x00\x1f", "<&>", "é✓😀", "\u2028\u2029", "\xff", "\xe2\x9c", "\xed\xa0\x80", "\ufffd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkAppendString(t, s)
	})
}

// MarshalEscaping writes every string as encoding/json.Marshal does.
func checkMarshalEscaping(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := MarshalEscaping.AppendString(nil, s); string(got) != string(want) {
		t.Fatalf("MarshalEscaping.AppendString(%q) = %q, json.Marshal %q", s, got, want)
	}
}

func TestMarshalEscaping_allBytes(t *testing.T) {
	for c := 0; c < 256; c++ {
		checkMarshalEscaping(t, string([]byte{byte(c)}))
		checkMarshalEscaping(t, "a<b>c&d"+string([]byte{byte(c)})+"\u2028 and some more text")
	}
	for r := rune(0); r < 0x3000; r++ {
		checkMarshalEscaping(t, string(r))
	}
}

func FuzzMarshalEscaping(f *testing.F) {
	for _, s := range []string{"", "hello", `a"b\c`, "\b\f\n\r\t\x00\x1f", "<&>", "é✓😀", "\u2028\u2029", "\xff", "\xe2\x9c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkMarshalEscaping(t, s)
	})
}

// nested returns a document n levels deep, objects and arrays alternating, and the same
// with the closer at depth swap (from the top, 1-based) of the other kind.
func nested(n, swap int) (good, bad string) {
	var open, closeOK, closeBad strings.Builder
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			open.WriteString(`{"a":`)
		} else {
			open.WriteString(`[`)
		}
	}
	for i := n - 1; i >= 0; i-- {
		c, other := "}", "]"
		if i%2 == 1 {
			c, other = "]", "}"
		}
		closeOK.WriteString(c)
		if i == swap-1 {
			c = other
		}
		closeBad.WriteString(c)
	}
	return open.String() + "1" + closeOK.String(), open.String() + "1" + closeBad.String()
}

// TestValidate_deepMixedNesting: past the 512 levels the validator keeps in place, objects
// and arrays are still told apart (a wrong closer is an error) and the bound holds.
func TestValidate_deepMixedNesting(t *testing.T) {
	const n = 700
	good, _ := nested(n, 0)
	if err := Validate([]byte(good), 4096); err != nil {
		t.Fatalf("valid %d-deep document: %v", n, err)
	}
	for _, swap := range []int{101, 601} {
		if _, bad := nested(n, swap); Validate([]byte(bad), 4096) == nil {
			t.Fatalf("a wrong closer at depth %d was accepted", swap)
		}
	}
	var se *SyntaxError
	if err := Validate([]byte(good), n-1); !errors.As(err, &se) || !se.Deep {
		t.Fatalf("Validate(_, %d) = %v, want a Deep error", n-1, err)
	}
	// ValidValue keeps its levels in place: a bound over 512 counts as 512.
	if _, err := ValidValue(good, 0, 4096); !errors.As(err, &se) || !se.Deep {
		t.Fatalf("ValidValue(%d deep, 4096) = %v, want a Deep error (bound 512)", n, err)
	}
	good, bad := nested(512, 300)
	if end, err := ValidValue(good+" x", 0, 512); err != nil || end != len(good) {
		t.Fatalf("ValidValue(512 deep) = %d, %v; want %d, nil", end, err, len(good))
	}
	if _, err := ValidValue(bad, 0, 512); err == nil {
		t.Fatal("ValidValue accepted a wrong closer at depth 300")
	}
}

// FuzzValidValue: ValidValue accepts the value at the start of a document exactly when
// Validate accepts that value, and ends where it ends.
func FuzzValidValue(f *testing.F) {
	for _, s := range []string{`1 2`, `{"a":[1,"x"]} `, `"abc"x`, `[1,]`, `tru`, `{"a":1}}`, `-`, "\"\xff\"", `"\u12"`, `[[[[[[[[[]]]]]]]]]`} {
		f.Add([]byte(s), uint8(8))
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint8) {
		s := string(data)
		at := SkipWS(s, 0)
		d := int(depth%16) + 1
		end, err := ValidValue(s, at, d)
		var se *SyntaxError
		if errors.As(err, &se) && se.Deep {
			if depthOf(data[at:]) <= d {
				t.Fatalf("ValidValue(%q, %d) = %v, but it nests %d deep", s, d, err, depthOf(data[at:]))
			}
			return
		}
		if err != nil {
			if Validate(data, d) == nil {
				t.Fatalf("ValidValue(%q, %d) = %v, but the document is valid", s, d, err)
			}
			return
		}
		if end <= at || end > len(s) {
			t.Fatalf("ValidValue(%q) = %d outside (%d, %d]", s, end, at, len(s))
		}
		if verr := Validate(data[at:end], d); verr != nil {
			t.Fatalf("ValidValue(%q) accepted %q, which Validate rejects: %v", s, s[at:end], verr)
		}
		if Validate(data, d) == nil && SkipWS(s, end) != len(s) {
			t.Fatalf("ValidValue(%q) ended at %d inside a valid document", s, end)
		}
	})
}

// FuzzValidString: ValidString agrees with Validate on a string literal, and a plain
// literal's body is its value.
func FuzzValidString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, "\"\xff\"", `"\u00e9"`, `"abc`, "\"a\x01\"", `"é"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '"' {
			return
		}
		s := string(data)
		end, plain, ok := ValidString(s, 0)
		want, f := stringEnd(data, 1)
		if ok != (f == faultNone) || (ok && end != want) {
			t.Fatalf("ValidString(%q) = %d, %v; stringEnd = %d, fault %d", s, end, ok, want, f)
		}
		if ok && plain && Unquote(s[:end]) != s[1:end-1] {
			t.Fatalf("ValidString(%q) called a literal with escapes plain", s)
		}
	})
}

func TestAppendGap(t *testing.T) {
	tests := []struct {
		name, gap string
		first     bool
		want      string
	}{
		{name: "after the bracket, first written", gap: " \n ", first: true, want: " \n "},
		{name: "after the bracket, an element written before", gap: " ", want: ", "},
		{name: "between elements, first written", gap: " , ", first: true, want: "  "},
		{name: "between elements", gap: " ,\n", want: " ,\n"},
		{name: "empty", gap: "", first: true, want: ""},
	}
	for _, tc := range tests {
		if got := string(AppendGap([]byte("["), tc.gap, tc.first)); got != "["+tc.want {
			t.Errorf("%s: AppendGap(%q, %v) = %q, want %q", tc.name, tc.gap, tc.first, got, "["+tc.want)
		}
	}
}
