package health

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestFingerprint(t *testing.T) {
	a := `{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}},"_meta":{"x":1}}`
	tests := []struct {
		name string
		b    string
		same bool
	}{
		{"member order and whitespace", "{ \"inputSchema\": {\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\":\"string\"}}, \"type\": \"object\"},\n \"description\": \"d\", \"name\": \"t\"}", true},
		{"escapes spelled differently", `{"name":"\u0074","description":"d","inputSchema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}}`, true},
		{"stategate's own tags", `{"name":"t","description":"d [Cache-Control: no-store]","inputSchema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}}`, true},
		{"other members ignored", `{"name":"t","description":"d","icons":[],"inputSchema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}}`, true},
		{"a changed description", `{"name":"t","description":"d2","inputSchema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}}`, false},
		{"a changed schema", `{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"b":{"type":"string"}}}}`, false},
		{"annotations added", `{"name":"t","description":"d","annotations":{},"inputSchema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}}`, false},
	}
	fa := Fingerprint(gjson.Parse(a))
	if len(fa) != 64 {
		t.Fatalf("fingerprint %q is not 64 hex digits", fa)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if fb := Fingerprint(gjson.Parse(tc.b)); (fa == fb) != tc.same {
				t.Errorf("same = %v, want %v", fa == fb, tc.same)
			}
		})
	}
}

func TestOperatorMove(t *testing.T) {
	modes := []string{Active, Disabled, Quarantined, AutoDisabled}
	allowed := map[string]bool{
		"active>disabled": true, "active>quarantined": true,
		"disabled>active": true, "disabled>quarantined": true,
		"quarantined>disabled": true, "quarantined>active+approve": true,
		"auto_disabled>active": true, "auto_disabled>disabled": true,
	}
	for _, from := range modes {
		for _, to := range modes {
			for _, approve := range []bool{false, true} {
				if from == to && !approve && to != AutoDisabled {
					if r := OperatorMove(from, to, false); r != "" {
						t.Errorf("%s -> %s (no change) refused: %s", from, to, r)
					}
					continue
				}
				key := from + ">" + to
				if approve {
					key += "+approve"
				}
				refusal := OperatorMove(from, to, approve)
				if want := allowed[key]; (refusal == "") != want {
					t.Errorf("%s: refusal %q, want allowed=%v", key, refusal, want)
				}
				if refusal != "" && !strings.Contains(refusal, "rule ") && !strings.Contains(refusal, "unknown mode") {
					t.Errorf("%s: refusal %q names no rule", key, refusal)
				}
			}
		}
	}
}
