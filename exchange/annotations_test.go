package exchange

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// Unit tests of the core's side of stateSync.fromAnnotations, with the native engine and
// an in-memory State whose compare-and-set can be made to lose a race.

type nativePlugin struct{ e *engine.Engine }

func (p nativePlugin) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	return p.e.Call(fn, in), nil
}

type memState struct {
	mu     sync.Mutex
	vals   map[string][]byte
	race   func(key string) // runs before a Store, as another writer would
	locked [][]string
	forgot [][]string
}

func (m *memState) Load(_ context.Context, keys []string) ([]Slot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Slot, len(keys))
	for i, k := range keys {
		if v, ok := m.vals[k]; ok {
			out[i] = Slot{Value: v, Exists: true}
		}
	}
	return out, nil
}

func (m *memState) Store(_ context.Context, _, key string, value []byte, prev Slot) error {
	if m.race != nil {
		race := m.race
		m.race = nil
		race(key)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.vals[key]
	if ok != prev.Exists || string(cur) != string(prev.Value) {
		return ErrConflict
	}
	m.vals[key] = value
	return nil
}

func (m *memState) Lock(_ context.Context, keys []string, _ time.Duration) (func(), error) {
	m.locked = append(m.locked, keys)
	return func() {}, nil
}

func (m *memState) Forget(_ context.Context, _ string, keys []string) error {
	m.forgot = append(m.forgot, keys)
	return nil
}

const recordKey = "stategate/annotations/v1/"

func annotationsCore(t *testing.T, cfg string) (*Core, *memState) {
	t.Helper()
	e, err := engine.New([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	st := &memState{vals: map[string][]byte{}}
	return New(Options{Plugin: nativePlugin{e}, State: st, Config: []byte(cfg)}), st
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
	out, _ := ex.RewriteJSON(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":`+tools+`}}`))
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
	if n := c.Stats.Get(CountCASConflicts); n != 1 {
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
	out := gjson.ParseBytes(ex.TimeoutAnswer())
	meta := out.Get("result._meta")
	if meta.Get(gjson.Escape(abi.MetaError)+".code").Str != abi.DenyToolTimeout || meta.Get(gjson.Escape(abi.MetaError)+".details.timeoutMs").Int() != DefaultTimeout.Milliseconds() {
		t.Errorf("timeout answer %s", out.Raw)
	}
	if !meta.Get(gjson.Escape(abi.MetaDuration)).Exists() || out.Get("id").Raw != "7" {
		t.Errorf("timeout answer %s lacks the duration or the id", out.Raw)
	}
}
