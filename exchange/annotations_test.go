package exchange

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// Unit tests of the core's side of stateSync.fromAnnotations, with the native engine and
// an in-memory State whose compare-and-set can be made to lose a race.

const recordKey = "stategate/annotations/v1/"

func annotationsCore(t *testing.T, cfg string) (*Core, *testState) {
	t.Helper()
	e, err := engine.New([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	st := newTestState(false)
	return New(Options{Plugin: enginePlugin{e}, State: st, Config: []byte(cfg)}), st
}

func headers(session string) http.Header {
	h := http.Header{}
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", "2025-11-25")
	if session != "" {
		h.Set("Mcp-Session-Id", session)
	}
	return h
}

func listTools(t *testing.T, c *Core, tools string) []byte {
	t.Helper()
	ctx := context.Background()
	ex := c.Admit(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if ex.Verdict != Forward {
		t.Fatalf("tools/list verdict %v", ex.Verdict)
	}
	out, _ := ex.Answer().RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":`+tools+`}}`))
	return out
}

// TestRemember_conflictMerges: a record write that loses its compare-and-set is re-read and
// merged, keeping what the other writer stored.
func TestRemember_conflictMerges(t *testing.T) {
	c, st := annotationsCore(t, `{"version":1,"stateSync":{"fromAnnotations":true}}`)
	st.race = func(key string) {
		st.mu.Lock()
		st.vals[key] = []byte(`{"tools":{"notes.add":"write"}}`)
		st.mu.Unlock()
	}
	listTools(t, c, `[{"name":"tasks.list","annotations":{"readOnlyHint":true}},{"name":"tasks.add"}]`)
	rec := gjson.ParseBytes(st.vals[recordKey])
	for name, class := range map[string]string{"notes.add": "write", "tasks.list": "read", "tasks.add": "destructive"} {
		if got := rec.Get("tools." + gjson.Escape(name)).Str; got != class {
			t.Errorf("%s: %q, want %q in %s", name, got, class, rec.Raw)
		}
	}
	if n := c.Stats.Get(stats.CountCASConflicts); n != 1 {
		t.Errorf("%d conflicts counted, want 1", n)
	}
}

// TestAnnotationRecord_neverLeasedNorForgotten: a moving call leases only its workflow keys,
// and ending a session frees only session keys, never the principal's record.
func TestAnnotationRecord_neverLeasedNorForgotten(t *testing.T) {
	cfg := `{"version":1,"stateSync":{"fromAnnotations":true},"workflows":[{"id":"w","initial":"a",
	  "states":{"a":{"on":{"GO":"b"}},"b":{}},"tools":{"go":{"states":["a"],"event":"GO"}}}]}`
	c, st := annotationsCore(t, cfg)
	ctx := context.Background()
	ex := c.Admit(ctx, headers("s1"), []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"go","arguments":{}}}`))
	if ex.Verdict != Forward {
		t.Fatalf("verdict %v: %s", ex.Verdict, ex.Body)
	}
	ex.Close()
	if len(st.locked) != 1 || len(st.locked[0]) != 1 || !strings.HasPrefix(st.locked[0][0], "stategate/v1/w/session/") {
		t.Errorf("leased %v, want the workflow key alone", st.locked)
	}
	c.EndSession(ctx, "s1", "")
	if len(st.forgot) != 1 || len(st.forgot[0]) != 1 || !strings.HasPrefix(st.forgot[0][0], "stategate/v1/w/session/") {
		t.Errorf("forgot %v, want the session key alone", st.forgot)
	}
}

// TestTimeoutAnswer_withoutCheckLimits: a call forwarded with the default timeout (its
// check_limits failed open) still times out with a TOOL_TIMEOUT result.
func TestTimeoutAnswer_withoutCheckLimits(t *testing.T) {
	c, _ := annotationsCore(t, `{"version":1}`)
	ex := &Exchange{core: c, Tool: "tasks.list", clientID: []byte("7"), start: time.Now()}
	out := gjson.ParseBytes(ex.Answer().TimeoutAnswer())
	meta := out.Get("result._meta")
	if meta.Get(gjson.Escape(abi.MetaError)+".code").Str != abi.DenyToolTimeout || meta.Get(gjson.Escape(abi.MetaError)+".details.timeoutMs").Int() != DefaultTimeout.Milliseconds() {
		t.Errorf("timeout answer %s", out.Raw)
	}
	if !meta.Get(gjson.Escape(abi.MetaDuration)).Exists() || out.Get("id").Raw != "7" {
		t.Errorf("timeout answer %s lacks the duration or the id", out.Raw)
	}
}
