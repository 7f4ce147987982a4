package gate

import (
	"encoding/json"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/tidwall/gjson"
)

// testConfig holds a session-keyed workflow (checkout, from the sample) and a
// handle-keyed one (order) whose handle argument needs path escaping.
const testConfig = `{
  "version": 1,
  "workflows": [
    {
      "id": "checkout", "initial": "empty", "key": "session",
      "states": {
        "empty": {"on": {"ADD_ITEM": "has_items"}},
        "has_items": {"on": {"ADD_ITEM": "has_items", "CHECKOUT": "payment", "CLEAR": "empty"}},
        "payment": {"on": {"PAY": "confirmed", "CANCEL": "has_items"}},
        "confirmed": {"type": "final"}
      },
      "tools": {
        "cart.add_item": {"states": ["empty", "has_items"], "event": "ADD_ITEM"},
        "cart.checkout": {"states": ["has_items"], "event": "CHECKOUT"},
        "cart.pay": {"states": ["payment"], "event": "PAY"}
      }
    },
    {
      "id": "order", "initial": "new", "key": "argument:order_id",
      "states": {"new": {"on": {"SHIP": "shipped"}}, "shipped": {"type": "final"}},
      "tools": {"order.ship": {"states": ["new"], "event": "SHIP"}}
    },
    {
      "id": "dotted", "initial": "a", "key": "argument:cart.id",
      "states": {"a": {}},
      "tools": {"x": {"states": ["a"]}}
    }
  ]
}`

func workflows(t testing.TB, doc string) map[string]*config.Workflow {
	t.Helper()
	c, problems := config.Parse([]byte(doc))
	if c == nil {
		t.Fatalf("config.Parse: %v", problems)
	}
	m := map[string]*config.Workflow{}
	for _, w := range c.Workflows {
		m[w.ID] = w
	}
	return m
}

func TestSampleConfig(t *testing.T) {
	data, err := os.ReadFile("../../../abi/testdata/config/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	w := workflows(t, string(data))["checkout"]
	if w == nil || w.Key != config.KeySession || w.Initial != "empty" {
		t.Fatalf("sample checkout workflow: %+v", w)
	}
	key, _, st := Key(w, &Scope{Session: "s1", Principal: "alice"})
	if st != KeyOK || key != "stategate/v1/checkout/session/alice/s1" {
		t.Errorf("Key = %q, %v", key, st)
	}
}

func TestEraOf(t *testing.T) {
	tests := []struct {
		name, version string
		want          Era
	}{
		{"no version", "", EraSession},
		{"2025-03-26", "2025-03-26", EraSession},
		{"2025-06-18", "2025-06-18", EraSession},
		{"2025-11-25", "2025-11-25", EraSession},
		{"day before", "2026-07-27", EraSession},
		{"first stateless version", "2026-07-28", EraStateless},
		{"later version", "2026-12-01", EraStateless},
		{"next year", "2027-01-15", EraStateless},
		{"suffixed", "2026-07-28-draft", EraSession},
		{"short", "2026-7-28", EraSession},
		{"garbage of the right length", "zzzzzzzzzz", EraSession},
		{"letters in the date", "2026-07-2x", EraSession},
		{"wrong separators", "2026/07/28", EraSession},
		{"leading space", " 2026-07-2", EraSession},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EraOf(tt.version); got != tt.want {
				t.Errorf("EraOf(%q) = %v, want %v", tt.version, got, tt.want)
			}
		})
	}
}

func TestHides(t *testing.T) {
	ws := workflows(t, testConfig)
	tests := []struct {
		name string
		w    *config.Workflow
		era  Era
		want bool
	}{
		{"session workflow in the session era", ws["checkout"], EraSession, true},
		{"session workflow in the stateless era", ws["checkout"], EraStateless, false},
		{"handle workflow in the session era", ws["order"], EraSession, false},
		{"handle workflow in the stateless era", ws["order"], EraStateless, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Hides(tt.w, tt.era); got != tt.want {
				t.Errorf("Hides = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKey(t *testing.T) {
	ws := workflows(t, testConfig)
	long := strings.Repeat("x", MaxScopeBytes)
	args := func(s string) gjson.Result { return gjson.Parse(s) }
	tests := []struct {
		name       string
		w          string
		scope      Scope
		wantKey    string
		wantHandle string
		wantStatus KeyStatus
	}{
		{
			name:    "session",
			w:       "checkout",
			scope:   Scope{Session: "s-1", Principal: "alice"},
			wantKey: "stategate/v1/checkout/session/alice/s-1",
		},
		{
			name:    "session and principal are percent-encoded",
			w:       "checkout",
			scope:   Scope{Session: "a/b c%", Principal: "bob@example.com/x"},
			wantKey: "stategate/v1/checkout/session/bob%40example.com%2Fx/a%2Fb%20c%25",
		},
		{
			name:    "non-ASCII bytes are encoded",
			w:       "checkout",
			scope:   Scope{Session: "\u00e9\x00\xff"},
			wantKey: "stategate/v1/checkout/session//%C3%A9%00%FF",
		},
		{
			name:    "no principal",
			w:       "checkout",
			scope:   Scope{Session: "s"},
			wantKey: "stategate/v1/checkout/session//s",
		},
		{
			name:    "longest session id",
			w:       "checkout",
			scope:   Scope{Session: long},
			wantKey: "stategate/v1/checkout/session//" + long,
		},
		{
			name:       "no session",
			w:          "checkout",
			scope:      Scope{Principal: "alice"},
			wantStatus: KeyNoSession,
		},
		{
			name:       "session id over the limit",
			w:          "checkout",
			scope:      Scope{Session: long + "x"},
			wantStatus: KeyNoSession,
		},
		{
			name:       "principal over the limit",
			w:          "checkout",
			scope:      Scope{Session: "s", Principal: long + "x"},
			wantStatus: KeyBadScope,
		},
		{
			name:       "string handle",
			w:          "order",
			scope:      Scope{Principal: "alice", Args: args(`{"order_id":"ord-1","qty":2}`)},
			wantKey:    "stategate/v1/order/arg.order_id/alice/ord-1",
			wantHandle: "ord-1",
		},
		{
			name:       "handle ignores the session",
			w:          "order",
			scope:      Scope{Session: "s", Args: args(`{"order_id":"ord-1"}`)},
			wantKey:    "stategate/v1/order/arg.order_id//ord-1",
			wantHandle: "ord-1",
		},
		{
			name:       "number handle",
			w:          "order",
			scope:      Scope{Args: args(`{"order_id":42}`)},
			wantKey:    "stategate/v1/order/arg.order_id//42",
			wantHandle: "42",
		},
		{
			name:       "number handle keeps its spelling",
			w:          "order",
			scope:      Scope{Args: args(`{"order_id":-1500}`)},
			wantKey:    "stategate/v1/order/arg.order_id//-1500",
			wantHandle: "-1500",
		},
		{
			name:       "a number spelled another way is refused (1.0 and 1 would be two carts)",
			w:          "order",
			scope:      Scope{Args: args(`{"order_id":-1.5e3}`)},
			wantStatus: KeyBadHandle,
		},
		{
			name:       "a repeated handle is refused (gate and server could read different ones)",
			w:          "order",
			scope:      Scope{Args: args(`{"order_id":"a","order_id":"b"}`)},
			wantStatus: KeyBadHandle,
		},
		{
			name:       "escaped string handle is decoded then encoded",
			w:          "order",
			scope:      Scope{Args: args(`{"order_id":"a\u002fb\"c"}`)},
			wantKey:    "stategate/v1/order/arg.order_id//a%2Fb%22c",
			wantHandle: `a/b"c`,
		},
		{
			name:       "escaped argument name",
			w:          "order",
			scope:      Scope{Args: args(`{"order\u005fid":"h"}`)},
			wantKey:    "stategate/v1/order/arg.order_id//h",
			wantHandle: "h",
		},
		{
			name:       "longest handle",
			w:          "order",
			scope:      Scope{Args: args(`{"order_id":"` + long + `"}`)},
			wantKey:    "stategate/v1/order/arg.order_id//" + long,
			wantHandle: long,
		},
		{
			name:       "dotted argument name is one key, not a path",
			w:          "dotted",
			scope:      Scope{Args: args(`{"cart":{"id":"nested"},"cart.id":"flat"}`)},
			wantKey:    "stategate/v1/dotted/arg.cart.id//flat",
			wantHandle: "flat",
		},
		{
			name:       "dotted argument name does not reach into objects",
			w:          "dotted",
			scope:      Scope{Args: args(`{"cart":{"id":"nested"}}`)},
			wantStatus: KeyMissingHandle,
		},
		{name: "handle absent", w: "order", scope: Scope{Args: args(`{"other":"x"}`)}, wantStatus: KeyMissingHandle},
		{name: "no arguments", w: "order", scope: Scope{}, wantStatus: KeyMissingHandle},
		{name: "null arguments", w: "order", scope: Scope{Args: args(`null`)}, wantStatus: KeyMissingHandle},
		{name: "array arguments", w: "order", scope: Scope{Args: args(`["h"]`)}, wantStatus: KeyMissingHandle},
		{name: "null handle", w: "order", scope: Scope{Args: args(`{"order_id":null}`)}, wantStatus: KeyMissingHandle},
		{name: "empty handle", w: "order", scope: Scope{Args: args(`{"order_id":""}`)}, wantStatus: KeyMissingHandle},
		{name: "boolean handle", w: "order", scope: Scope{Args: args(`{"order_id":true}`)}, wantStatus: KeyBadHandle},
		{name: "false handle", w: "order", scope: Scope{Args: args(`{"order_id":false}`)}, wantStatus: KeyBadHandle},
		{name: "object handle", w: "order", scope: Scope{Args: args(`{"order_id":{"id":1}}`)}, wantStatus: KeyBadHandle},
		{name: "array handle", w: "order", scope: Scope{Args: args(`{"order_id":[1]}`)}, wantStatus: KeyBadHandle},
		// Readers decode an unpaired surrogate differently (U+FFFD, swallowing what follows,
		// or a lone code unit): "\ud800A" and "\ud800B" must not be one cart.
		{name: "handle with an unpaired surrogate", w: "order", scope: Scope{Args: args(`{"order_id":"\ud800\u0041"}`)}, wantStatus: KeyBadHandle},
		{name: "handle with a lone low surrogate", w: "order", scope: Scope{Args: args(`{"order_id":"x\udc00"}`)}, wantStatus: KeyBadHandle},
		{name: "handle with invalid UTF-8", w: "order", scope: Scope{Args: args("{\"order_id\":\"a\xff\"}")}, wantStatus: KeyBadHandle},
		{
			name:       "handle with a surrogate pair",
			w:          "order",
			scope:      Scope{Args: args(`{"order_id":"\ud83d\ude00"}`)},
			wantKey:    "stategate/v1/order/arg.order_id//%F0%9F%98%80",
			wantHandle: "\U0001F600",
		},
		{name: "handle over the limit", w: "order", scope: Scope{Args: args(`{"order_id":"` + long + `x"}`)}, wantStatus: KeyBadHandle},
		{name: "number handle over the limit", w: "order", scope: Scope{Args: args(`{"order_id":` + strings.Repeat("9", MaxScopeBytes+1) + `}`)}, wantStatus: KeyBadHandle},
		{name: "handle with a principal over the limit", w: "order", scope: Scope{Principal: long + "x", Args: args(`{"order_id":"h"}`)}, wantStatus: KeyBadScope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := ws[tt.w]
			key, handle, st := Key(w, &tt.scope)
			if st != tt.wantStatus {
				t.Fatalf("status = %v, want %v", st, tt.wantStatus)
			}
			if key != tt.wantKey || handle != tt.wantHandle {
				t.Errorf("Key = %q, %q; want %q, %q", key, handle, tt.wantKey, tt.wantHandle)
			}
			if st != KeyOK {
				return
			}
			// A key is printable ASCII without spaces, and its four scope segments split
			// cleanly on '/'.
			for i := 0; i < len(key); i++ {
				if key[i] <= ' ' || key[i] >= 0x7f {
					t.Errorf("key %q has byte %#x", key, key[i])
				}
			}
			if n := strings.Count(key, "/"); n != 5 {
				t.Errorf("key %q has %d slashes, want 5", key, n)
			}
		})
	}
}

// TestKey_distinct derives keys for many random scopes: two scopes share a key exactly
// when their principal and session (or handle) are equal.
func TestKey_distinct(t *testing.T) {
	ws := workflows(t, testConfig)
	rng := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "A", "0", "/", "%", "%2F", "2F", ".", "-", "_", " ", "\u00e9", "\x00", "\xff", "+", ":", "@"}
	randValue := func() string {
		var b strings.Builder
		for i := rng.Intn(5); i >= 0; i-- {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		return b.String()
	}
	type scope struct{ kind, principal, value string }
	seen := map[string]scope{}
	for i := 0; i < 20000; i++ {
		s := scope{principal: randValue(), value: randValue()}
		var key string
		var st KeyStatus
		if rng.Intn(2) == 0 {
			s.kind = "session"
			key, _, st = Key(ws["checkout"], &Scope{Principal: s.principal, Session: s.value})
		} else {
			s.kind = "handle"
			enc, _ := json.Marshal(map[string]string{"order_id": s.value})
			var h string
			key, h, st = Key(ws["order"], &Scope{Principal: s.principal, Args: gjson.ParseBytes(enc)})
			// encoding/json turns invalid UTF-8 into U+FFFD; the handle is what arrived.
			var dec map[string]string
			_ = json.Unmarshal(enc, &dec)
			s.value = dec["order_id"]
			if st == KeyOK && h != s.value {
				t.Fatalf("handle = %q, want %q", h, s.value)
			}
		}
		if st != KeyOK {
			t.Fatalf("Key(%+v): status %v", s, st)
		}
		if prev, ok := seen[key]; ok && prev != s {
			t.Fatalf("scopes %+v and %+v share key %q", prev, s, key)
		}
		seen[key] = s
	}
}

// TestKey_handleSpelling documents that a handle is its text: the string "42" and the
// number 42 are the same handle (a client may send either), while different texts are
// different handles.
func TestKey_handleSpelling(t *testing.T) {
	w := workflows(t, testConfig)["order"]
	key := func(args string) string {
		k, _, st := Key(w, &Scope{Principal: "p", Args: gjson.Parse(args)})
		if st != KeyOK {
			t.Fatalf("Key(%s): %v", args, st)
		}
		return k
	}
	if key(`{"order_id":"42"}`) != key(`{"order_id":42}`) {
		t.Errorf(`"42" and 42 should name the same state`)
	}
	if key(`{"order_id":"42"}`) == key(`{"order_id":"042"}`) {
		t.Errorf(`"42" and "042" must not share a key`)
	}
	a, _, _ := Key(w, &Scope{Principal: "p", Args: gjson.Parse(`{"order_id":"h"}`)})
	b, _, _ := Key(w, &Scope{Principal: "q", Args: gjson.Parse(`{"order_id":"h"}`)})
	if a == b {
		t.Errorf("different principals share key %q", a)
	}
}

func TestLoad(t *testing.T) {
	ws := workflows(t, testConfig)
	w := ws["checkout"]
	fp := w.Fingerprint
	if fp == "" {
		t.Fatal("empty fingerprint")
	}
	snap := func(workflow, fingerprint, state string, seq int) string {
		return `{"workflow":"` + workflow + `","fingerprint":"` + fingerprint + `","state":"` + state + `","seq":` + strconv.Itoa(seq) + `}`
	}
	seqSnap := func(seq string) string {
		return `{"workflow":"checkout","fingerprint":"` + fp + `","state":"payment","seq":` + seq + `}`
	}
	tests := []struct {
		name       string
		snap       string // "" for no snapshot at all
		wantState  string
		wantSeq    int64
		wantHealed bool
		wantNotice string
	}{
		{name: "no snapshot", snap: "", wantState: "empty"},
		{name: "null snapshot", snap: "null", wantState: "empty"},
		{name: "stored state", snap: snap("checkout", fp, "payment", 7), wantState: "payment", wantSeq: 7},
		{name: "stored final state", snap: snap("checkout", fp, "confirmed", 1), wantState: "confirmed", wantSeq: 1},
		{name: "members in any order", snap: `{"seq":3,"state":"has_items","fingerprint":"` + fp + `","workflow":"checkout"}`, wantState: "has_items", wantSeq: 3},
		{name: "escaped members", snap: `{"workflow":"check\u006fut","fingerprint":"` + fp + `","state":"p\u0061yment","seq":2}`, wantState: "payment", wantSeq: 2},
		{name: "missing seq", snap: `{"workflow":"checkout","fingerprint":"` + fp + `","state":"payment"}`, wantState: "payment"},
		{name: "another workflow", snap: snap("order", fp, "payment", 4), wantState: "empty", wantHealed: true, wantNotice: NoticeReset},
		{name: "no workflow member", snap: `{"fingerprint":"` + fp + `","state":"payment"}`, wantState: "empty", wantHealed: true, wantNotice: NoticeReset},
		{name: "garbage string", snap: `"garbage"`, wantState: "empty", wantHealed: true, wantNotice: NoticeReset},
		{name: "garbage number", snap: `12`, wantState: "empty", wantHealed: true, wantNotice: NoticeReset},
		{name: "garbage array", snap: `["checkout","payment"]`, wantState: "empty", wantHealed: true, wantNotice: NoticeReset},
		{name: "empty object", snap: `{}`, wantState: "empty", wantHealed: true, wantNotice: NoticeReset},
		{name: "state not a string", snap: `{"workflow":"checkout","fingerprint":"` + fp + `","state":3,"seq":1}`, wantState: "empty", wantHealed: true, wantNotice: NoticeReset},
		{name: "unknown state", snap: snap("checkout", fp, "shipped", 5), wantState: "empty", wantSeq: 5, wantHealed: true, wantNotice: NoticeReset},
		{name: "changed definition keeps an existing state", snap: snap("checkout", "old", "payment", 9), wantState: "payment", wantSeq: 9, wantHealed: true, wantNotice: NoticeMigrated},
		{name: "missing fingerprint counts as changed", snap: `{"workflow":"checkout","state":"has_items","seq":1}`, wantState: "has_items", wantSeq: 1, wantHealed: true, wantNotice: NoticeMigrated},
		{name: "changed definition without the state resets", snap: snap("checkout", "old", "gone", 9), wantState: "empty", wantSeq: 9, wantHealed: true, wantNotice: NoticeReset},
		{name: "huge seq saturates", snap: seqSnap(`1e300`), wantState: "payment", wantSeq: 1<<63 - 1},
		{name: "seq just over int64 saturates", snap: seqSnap(`9223372036854775808`), wantState: "payment", wantSeq: 1<<63 - 1},
		{name: "largest seq", snap: seqSnap(`9223372036854775807`), wantState: "payment", wantSeq: 1<<63 - 1},
		{name: "hugely negative seq saturates", snap: seqSnap(`-1e300`), wantState: "payment", wantSeq: -1 << 63},
		{name: "fractional seq", snap: seqSnap(`2.9`), wantState: "payment", wantSeq: 2},
		{name: "exponent seq", snap: seqSnap(`4E2`), wantState: "payment", wantSeq: 400},
		{name: "string seq", snap: seqSnap(`"5"`), wantState: "payment"},
		{name: "boolean seq", snap: seqSnap(`true`), wantState: "payment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r gjson.Result
			if tt.snap != "" {
				if !json.Valid([]byte(tt.snap)) {
					t.Fatalf("test snapshot is not valid JSON: %s", tt.snap)
				}
				r = gjson.Parse(tt.snap)
			}
			c, n := Load(w, "k", r)
			if c.Workflow != w || c.Key != "k" {
				t.Errorf("Current = %+v", c)
			}
			if c.Describe() != tt.wantState || c.Healed != tt.wantHealed {
				t.Errorf("state %q healed %v, want %q %v", c.Describe(), c.Healed, tt.wantState, tt.wantHealed)
			}
			if c.Seq != tt.wantSeq {
				t.Errorf("seq = %d, want %d", c.Seq, tt.wantSeq)
			}
			if tt.wantNotice == "" {
				if n != nil {
					t.Errorf("unexpected notice %+v", n)
				}
				return
			}
			if n == nil {
				t.Fatalf("no notice, want %s", tt.wantNotice)
			}
			if n.Code != tt.wantNotice || n.Workflow != "checkout" || n.Message == "" {
				t.Errorf("notice = %+v, want code %s", n, tt.wantNotice)
			}
			if !strings.Contains(n.Message, strconv.Quote(c.Describe())) {
				t.Errorf("notice %q does not name the state it continues in (%q)", n.Message, c.Describe())
			}
		})
	}
}

func TestAppendSnapshot(t *testing.T) {
	w := workflows(t, testConfig)["checkout"]
	got := string(AppendSnapshot([]byte("x"), w, confOf(w, "payment"), 3))
	want := `x{"workflow":"checkout","fingerprint":"` + w.Fingerprint + `","state":"payment","seq":3}`
	if got != want {
		t.Fatalf("AppendSnapshot = %s, want %s", got, want)
	}
	if !json.Valid([]byte(got[1:])) {
		t.Fatalf("not valid JSON: %s", got)
	}
	for _, state := range []string{"empty", "has_items", "payment", "confirmed"} {
		for _, seq := range []int64{0, 1, -1, 1 << 62} {
			snap := AppendSnapshot(nil, w, confOf(w, state), seq)
			c, n := Load(w, "k", gjson.ParseBytes(snap))
			if n != nil || c.Healed || c.Describe() != state || c.Seq != seq {
				t.Errorf("round trip of %s: %+v, %+v", snap, c, n)
			}
		}
	}
	// A state name that needs escaping loads as unknown.
	snap := []byte(`{"workflow":"checkout","fingerprint":"` + w.Fingerprint + `","state":"a\"b\\\n","seq":1}`)
	if c, n := Load(w, "k", gjson.ParseBytes(snap)); n == nil || n.Code != NoticeReset || c.Describe() != w.Initial {
		t.Errorf("unknown state loaded as %+v, %+v", c, n)
	}
}

func TestSameTools(t *testing.T) {
	w := workflows(t, testConfig)["checkout"]
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"same state", "payment", "payment", true},
		{"add_item in both, checkout only in has_items", "empty", "has_items", false},
		{"disjoint tools", "has_items", "payment", false},
		{"pay only in payment", "payment", "confirmed", false},
		{"no tools in either", "confirmed", "unknown", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SameTools(w, confOf(w, tt.a), confOf(w, tt.b)); got != tt.want {
				t.Errorf("SameTools(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := SameTools(w, confOf(w, tt.b), confOf(w, tt.a)); got != tt.want {
				t.Errorf("SameTools(%q, %q) = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
			}
		})
	}
}

func FuzzKey(f *testing.F) {
	f.Add("alice", "s1", `{"order_id":"h"}`)
	f.Add("", "", `{"order_id":1e5}`)
	f.Add("a/b", "%", `[1]`)
	ws := workflows(f, testConfig)
	f.Fuzz(func(t *testing.T, principal, session, args string) {
		a := gjson.Parse(args)
		if !json.Valid([]byte(args)) {
			a = gjson.Result{}
		}
		for _, w := range ws {
			key, _, st := Key(w, &Scope{Principal: principal, Session: session, Args: a})
			if st != KeyOK {
				if key != "" {
					t.Fatalf("status %v with key %q", st, key)
				}
				continue
			}
			if strings.Count(key, "/") != 5 || !strings.HasPrefix(key, "stategate/v1/"+w.ID+"/") {
				t.Fatalf("malformed key %q", key)
			}
			for i := 0; i < len(key); i++ {
				if key[i] <= ' ' || key[i] >= 0x7f {
					t.Fatalf("key %q has byte %#x", key, key[i])
				}
			}
		}
	})
}

func FuzzLoad(f *testing.F) {
	ws := workflows(f, testConfig)
	w := ws["checkout"]
	f.Add(string(AppendSnapshot(nil, w, confOf(w, "payment"), 1)))
	f.Add(`{"workflow":"checkout","state":"x"}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, snap string) {
		if !json.Valid([]byte(snap)) {
			return
		}
		c, n := Load(w, "k", gjson.Parse(snap))
		if _, ok := w.State(c.Describe()); !ok {
			t.Fatalf("Load returned unknown state %q", c.Describe())
		}
		if (n != nil) != c.Healed {
			t.Fatalf("notice %+v but healed %v", n, c.Healed)
		}
		if c.Healed {
			return
		}
		// A snapshot that loads cleanly round-trips through AppendSnapshot.
		again, n2 := Load(w, "k", gjson.ParseBytes(AppendSnapshot(nil, w, confOf(w, c.Describe()), c.Seq)))
		if n2 != nil || again.Describe() != c.Describe() || again.Seq != c.Seq {
			t.Fatalf("round trip: %+v -> %+v (%+v)", c, again, n2)
		}
	})
}

// confOf returns the configuration of a flat workflow in its state name.
func confOf(w *config.Workflow, name string) *config.Conf {
	c, _ := w.ParseValue(gjson.Parse(strconv.Quote(name)))
	return &c
}
