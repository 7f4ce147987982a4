package engine

import (
	"strconv"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/health"
	"github.com/tidwall/gjson"
)

// TestToolErrorCode: which JSON-RPC error codes are the tool's failures (counted) and
// which the caller's (never counted).
func TestToolErrorCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int64
		tool bool
	}{
		{"internal error", -32603, true},
		{"server error, top of the range", -32000, true},
		{"server error, bottom of the range", -32099, true},
		{"request timeout of the SDKs", -32001, true},
		{"parse error", -32700, false},
		{"invalid request", -32600, false},
		{"method not found", -32601, false},
		{"invalid params", -32602, false},
		{"header mismatch", -32020, false},
		{"missing client capability", -32021, false},
		{"unsupported protocol version", -32022, false},
		{"URL elicitation required", -32042, false},
		{"just past the range", -32100, false},
		{"application code", 42, false},
		{"zero", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := toolErrorCode(tc.code); got != tc.tool {
				t.Errorf("toolErrorCode(%d) = %v, want %v", tc.code, got, tc.tool)
			}
		})
	}
}

// TestHealth_oneCallerCannotDisable: no run of answers one caller causes (invalid params,
// isError results with countIsError) auto-disables a tool, however long; a second
// principal's isError result then counts.
func TestHealth_oneCallerCannotDisable(t *testing.T) {
	for _, e := range healthEngines(t) {
		key := health.Key(e.unitOf("github__create_issue"))
		rec := "null"
		call := func(principal, outcome, code string) gjson.Result {
			in := `{"tool":"github__create_issue","principal":` + strconv.Quote(principal) + `,"outcome":"` + outcome + `"`
			if code != "" {
				in += `,"errorCode":` + code
			}
			in += `,"isError":true,"now":1700000000000,"states":{` + strconv.Quote(key) + `:` + rec + `}}`
			out := gjson.ParseBytes(e.Call(abi.FuncTransition, []byte(in)))
			if out.Get("error").Exists() {
				t.Fatalf("transition: %s", out.Raw)
			}
			if w := out.Get("states." + gjson.Escape(key)); w.Exists() {
				rec = w.Raw
			}
			return out
		}
		for i := 0; i < 100; i++ {
			for _, o := range [][2]string{{"error", "-32602"}, {"error", "-32601"}, {"error", "7"}, {"is_error", ""}} {
				if to := call("mallory", o[0], o[1]).Get("health.to").Str; to != health.Active {
					t.Fatalf("call %d (%s %s) by one principal moved the unit to %s: %s", i, o[0], o[1], to, rec)
				}
			}
		}
		_, _, countIsError := e.cfg.Health.For(e.unitOf("github__create_issue"))
		if !countIsError {
			continue
		}
		if to := call("alice", "is_error", "").Get("health.to").Str; to != health.AutoDisabled {
			t.Errorf("a second principal's isError (threshold 2) left the unit %s: %s", to, rec)
		}
	}
}
