package extismnode

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// scanScript runs gateway.mjs's scanJSON on every text of a JSON array read from stdin.
const scanScript = `
import { scanJSON } from './gateway.mjs';
let input = '';
for await (const chunk of process.stdin) input += chunk;
process.stdout.write(JSON.stringify(JSON.parse(input).map((text) => {
  try {
    const s = scanJSON(text);
    const id = s.members.get('id');
    return { valid: true, repeats: s.repeats, id: id ? text.slice(id[0], id[1]) : null };
  } catch {
    return { valid: false };
  }
})));
`

// TestScanJSON checks gateway.mjs's strict scanner: validity agrees with encoding/json (but
// for nesting past 4096), repeated member names are found in any object after unescaping,
// and the top-level id's span is exact.
func TestScanJSON(t *testing.T) {
	needNode(t)
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, text string
		valid      bool
		repeats    bool
		id         string // raw top-level id; "" for none
	}{
		{"empty_object", `{}`, true, false, ""},
		{"repeated_member", `{"a":1,"a":2}`, true, true, ""},
		{"repeated_after_unescaping", `{"a":1,"\u0061":2}`, true, true, ""},
		{"repeated_in_a_nested_object", `{"p":{"b":1,"b":2}}`, true, true, ""},
		{"repeated_in_an_array_element", `[1,{"b":1,"b":2}]`, true, true, ""},
		{"same_name_in_two_objects", `[{"a":1},{"a":1},{"b":{"a":2}}]`, true, false, ""},
		{"id_kept_byte_for_byte", `{"jsonrpc":"2.0","id":1.50,"x":[1,2]}`, true, false, "1.50"},
		{"id_is_top_level_only", `{"x":{"id":2},"id":"s"}`, true, false, `"s"`},
		{"id_with_spaces_around", "{ \"id\" :\t7 \n}", true, false, "7"},
		{"escaped_id_name", `{"\u0069d":"\u00e9"}`, true, false, `"\u00e9"`},
		{"scalars", `{"a":-0.5e+10,"b":true,"c":false,"d":null,"e":"\/\ud800"}`, true, false, ""},
		{"whitespace_around", " \t\r\n{}\n ", true, false, ""},
		{"a_string", `"a"`, true, false, ""},
		{"byte_order_mark", "\ufeff{}", false, false, ""},
		{"leading_zero", `{"a":01}`, false, false, ""},
		{"trailing_comma_object", `{"a":1,}`, false, false, ""},
		{"trailing_comma_array", `[1,]`, false, false, ""},
		{"control_character", "{\"a\":\"\x01\"}", false, false, ""},
		{"short_unicode_escape", `{"a":"\u12"}`, false, false, ""},
		{"bad_escape", `{"a":"\x"}`, false, false, ""},
		{"missing_colon", `{"a" 1}`, false, false, ""},
		{"two_values", `{} {}`, false, false, ""},
		{"unterminated", `{"a":"b"`, false, false, ""},
		{"bare_fraction", `{"a":.5}`, false, false, ""},
		{"dangling_point", `{"a":1.}`, false, false, ""},
		{"plus_sign", `{"a":+1}`, false, false, ""},
		{"nan", `{"a":NaN}`, false, false, ""},
		{"truncated_literal", `[tru]`, false, false, ""},
		{"single_quotes", `{'a':1}`, false, false, ""},
		{"empty", ``, false, false, ""},
		{"long_string", `{"a":"` + strings.Repeat("x", 1<<20) + `"}`, true, false, ""},
		{"nesting_4096", deep(4096), true, false, ""},
		{"nesting_4097", deep(4097), false, false, ""}, // encoding/json accepts it; the gateway refuses
	}
	texts := make([]string, len(tests))
	for i, tt := range tests {
		texts[i] = tt.text
	}
	in, _ := json.Marshal(texts)
	cmd := exec.Command("node", "--input-type=module", "-e", scanScript)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []struct {
		Valid, Repeats bool
		ID             *string
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(tests) {
		t.Fatalf("output %q: %v", out, err)
	}
	for i, tt := range tests {
		g := got[i]
		id := ""
		if g.ID != nil {
			id = *g.ID
		}
		if g.Valid != tt.valid || g.Repeats != tt.repeats || id != tt.id {
			t.Errorf("%s: valid %v repeats %v id %q; want %v %v %q", tt.name, g.Valid, g.Repeats, id, tt.valid, tt.repeats, tt.id)
		}
		if tt.name != "nesting_4097" && json.Valid([]byte(tt.text)) != tt.valid {
			t.Errorf("%s: encoding/json says valid = %v; the table is wrong", tt.name, !tt.valid)
		}
	}
}
