package approval

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
)

const now = int64(1_790_000_000_000)

func testKey(id string, fill byte) Key {
	return Key{ID: id, Secret: bytes.Repeat([]byte{fill}, SecretLen)}
}

func testBind(t *testing.T) Bind {
	t.Helper()
	d, ok := ArgsDigest([]byte(`{"path":"/etc/passwd"}`))
	if !ok {
		t.Fatal("no digest")
	}
	return Bind{
		Tool: "delete_file", ArgsDigest: d, Principal: "alice", Scope: "scope-1",
		Workflow: WorkflowOf([]string{"stategate/v1/files/arg.path///etc/passwd"}, [][]byte{[]byte(`{"seq":3}`)}),
		Expiry:   now + 300000, Nonce: [NonceLen]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
	}
}

func TestSealOpen_roundTrip(t *testing.T) {
	k := testKey("k1", 7)
	b := testBind(t)
	s := Seal(&k, &b)
	if !strings.HasPrefix(s, Prefix) || len(s) > MaxState {
		t.Fatalf("Seal = %q (%d bytes)", s, len(s))
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			t.Fatalf("state %q is not URL-safe (%q)", s, c)
		}
	}
	st, err := Open([]Key{testKey("old", 9), k}, s, now)
	if err != nil {
		t.Fatal(err)
	}
	if st.Tool != b.Tool || st.Expiry != b.Expiry || st.Nonce != b.Nonce || st.KeyID != "k1" {
		t.Fatalf("Open = %+v", st)
	}
	if err := st.Match(&b); err != nil {
		t.Fatalf("Match of the same call: %v", err)
	}
	// The client re-serialises the arguments: another order and whitespace are the same call.
	again := b
	again.ArgsDigest, _ = ArgsDigest([]byte(" { \"path\" : \"\\/etc\\/passwd\" } "))
	if err := st.Match(&again); err != nil {
		t.Fatalf("Match after re-serialisation: %v", err)
	}
	// Nothing the client must not learn is in the clear.
	payload, _ := b64.DecodeString(s[len(Prefix):strings.LastIndexByte(s, '.')])
	for _, secret := range []string{"alice", "scope-1", "/etc/passwd"} {
		if bytes.Contains(payload, []byte(secret)) {
			t.Errorf("payload holds %q in the clear", secret)
		}
	}
}

// TestOpen_forgedOrReplayed: one case per way of forging, tampering with or misusing a
// state; each is refused with its own error, and none yields a state.
func TestOpen_forgedOrReplayed(t *testing.T) {
	k := testKey("k1", 7)
	b := testBind(t)
	s := Seal(&k, &b)
	dot := strings.LastIndexByte(s, '.')
	flip := func(s string, at int) string {
		c := []byte(s)
		// Another base64url character at the same place: the decoded bytes change.
		if c[at] == 'A' {
			c[at] = 'B'
		} else {
			c[at] = 'A'
		}
		return string(c)
	}
	other := testKey("k1", 8) // the same id, another secret: another gateway
	otherSeal := Seal(&other, &b)
	expired := b
	expired.Expiry = now
	cases := []struct {
		name  string
		state string
		keys  []Key
		want  error
	}{
		{"bit flip in the payload", flip(s, len(Prefix)+10), nil, ErrForged},
		{"bit flip in the key id", flip(s, len(Prefix)+3), nil, ErrForged},
		{"bit flip in the format", flip(s, len(Prefix)+1), nil, ErrMalformed},
		{"bit flip in the MAC", flip(s, dot+5), nil, ErrForged},
		{"signed by another key", otherSeal, nil, ErrForged},
		{"key no longer accepted", s, []Key{testKey("k2", 7)}, ErrForged},
		{"expired", Seal(&k, &expired), nil, ErrExpired},
		{"truncated MAC", s[:len(s)-3], nil, ErrMalformed},
		{"truncated payload", s[:dot-4] + s[dot:], nil, ErrForged},
		{"no MAC", s[:dot], nil, ErrMalformed},
		{"oversized", s + strings.Repeat("A", MaxState), nil, ErrMalformed},
		{"wrong version", "sg2." + s[len(Prefix):], nil, ErrMalformed},
		{"not ours", "eyJhbGciOiJIUzI1NiJ9.e30.x", nil, ErrMalformed},
		{"payload not base64", Prefix + "***" + s[dot:], nil, ErrMalformed},
		{"MAC not base64", s[:dot+1] + "!!" + s[dot+3:], nil, ErrMalformed},
		{"padded base64", s + "=", nil, ErrMalformed},
		{"empty", "", nil, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keys := c.keys
			if keys == nil {
				keys = []Key{k}
			}
			st, err := Open(keys, c.state, now)
			if !errors.Is(err, c.want) || st != nil {
				t.Fatalf("Open(%q) = %v, %v; want %v", c.state, st, err, c.want)
			}
		})
	}
}

// TestMatch_otherCall: a good state presented with another call is refused, naming what
// differs.
func TestMatch_otherCall(t *testing.T) {
	k := testKey("k1", 7)
	b := testBind(t)
	st, err := Open([]Key{k}, Seal(&k, &b), now)
	if err != nil {
		t.Fatal(err)
	}
	otherArgs, _ := ArgsDigest([]byte(`{"path":"/etc/shadow"}`))
	cases := []struct {
		field string
		edit  func(*Bind)
	}{
		{"tool", func(b *Bind) { b.Tool = "delete_files" }},
		{"arguments", func(b *Bind) { b.ArgsDigest = otherArgs }},
		{"principal", func(b *Bind) { b.Principal = "mallory" }},
		{"scope", func(b *Bind) { b.Scope = "scope-2" }},
		{"workflow", func(b *Bind) {
			b.Workflow = WorkflowOf([]string{"stategate/v1/files/arg.path///etc/passwd"}, [][]byte{[]byte(`{"seq":4}`)})
		}},
		{"workflow", func(b *Bind) {
			b.Workflow = WorkflowOf([]string{"stategate/v1/files/arg.path///etc/passwd"}, [][]byte{nil})
		}},
		// A value moved to another field is not the same call.
		{"principal", func(b *Bind) { b.Principal, b.Scope = b.Scope, b.Principal }},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			want := b
			c.edit(&want)
			err := st.Match(&want)
			var me *MismatchError
			if !errors.As(err, &me) || me.Field != c.field || !errors.Is(err, ErrMismatch) {
				t.Fatalf("Match = %v, want a mismatch of %s", err, c.field)
			}
		})
	}
}

func TestSeal_refusesWhatItCannotBind(t *testing.T) {
	k := testKey("k1", 7)
	b := testBind(t)
	b.Tool = strings.Repeat("t", MaxTool+1)
	if s := Seal(&k, &b); s != "" {
		t.Errorf("Seal of a %d-byte tool = %q", len(b.Tool), s)
	}
	b = testBind(t)
	short := Key{ID: "k1", Secret: []byte("short")}
	if s := Seal(&short, &b); s != "" {
		t.Errorf("Seal with a short secret = %q", s)
	}
	// The longest tool still makes a state within MaxState.
	b.Tool = strings.Repeat("t", MaxTool)
	if s := Seal(&k, &b); s == "" || len(s) > MaxState {
		t.Errorf("Seal of a %d-byte tool: %d bytes", MaxTool, len(s))
	}
}

func TestArgsDigest(t *testing.T) {
	empty, _ := ArgsDigest(nil)
	for _, args := range []string{"", " ", "null", "{}", " { } "} {
		if d, ok := ArgsDigest([]byte(args)); !ok || d != empty {
			t.Errorf("ArgsDigest(%q) differs from no arguments", args)
		}
	}
	a, _ := ArgsDigest([]byte(`{"a":1,"b":[1,2]}`))
	if b, _ := ArgsDigest([]byte(`{"b":[1,2],"a":1}`)); a != b {
		t.Error("member order changes the digest")
	}
	if b, _ := ArgsDigest([]byte(`{"a":1.0,"b":[1,2]}`)); a == b {
		t.Error("1 and 1.0 share a digest")
	}
	if b, _ := ArgsDigest([]byte(`{"a":1,"b":[2,1]}`)); a == b {
		t.Error("array order does not change the digest")
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `{"a":"\ud800"}`, `{"a":`, "{\"a\":\"\xff\"}"} {
		if _, ok := ArgsDigest([]byte(bad)); ok {
			t.Errorf("ArgsDigest(%q) has a digest", bad)
		}
	}
}

func TestUsedKey(t *testing.T) {
	k := testKey("k1", 7)
	b := testBind(t)
	st, _ := Open([]Key{k}, Seal(&k, &b), now)
	key := UsedKey(st)
	if !strings.HasPrefix(key, abi.ApprovalUsedPrefix) || abi.IsWorkflowKey(key) || !strings.HasSuffix(key, "/0102030405060708090a0b0c0d0e0f10") {
		t.Fatalf("UsedKey = %q", key)
	}
	b2 := b
	b2.Nonce[0] = 99
	st2, _ := Open([]Key{k}, Seal(&k, &b2), now)
	if UsedKey(st2) == key {
		t.Fatal("two nonces share a used key")
	}
}

// memStore is a store of one key with compare-and-set against absent, as the exchange's
// State gives it.
type memStore struct {
	mu    sync.Mutex
	value []byte
	// before runs inside create, before the write: a racing replica's write.
	before func()
}

func (m *memStore) get() ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.value, m.value != nil, nil
}

func (m *memStore) create(v []byte) (bool, error) {
	if m.before != nil {
		f := m.before
		m.before = nil
		f()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.value != nil {
		return false, nil
	}
	m.value = append([]byte(nil), v...)
	return true, nil
}

func counter() func([]byte) error {
	var n byte
	return func(b []byte) error {
		n++
		for i := range b {
			b[i] = n
		}
		return nil
	}
}

func TestEnsureKey_createsOnceAndReadsBack(t *testing.T) {
	st := &memStore{}
	keys, err := EnsureKey(st.get, st.create, counter())
	if err != nil || len(keys) != 1 || !keys[0].valid() {
		t.Fatalf("EnsureKey = %v, %v", keys, err)
	}
	// A restart, or another replica: the same key.
	again, err := EnsureKey(st.get, st.create, counter())
	if err != nil || again[0].ID != keys[0].ID || !bytes.Equal(again[0].Secret, keys[0].Secret) {
		t.Fatalf("second EnsureKey = %v, %v; want %v", again, err, keys)
	}
}

// TestEnsureKey_race: the replica that loses the creation reads and uses the winner's key,
// so states one seals the other opens.
func TestEnsureKey_race(t *testing.T) {
	st := &memStore{}
	var winner []Key
	st.before = func() {
		var err error
		winner, err = EnsureKey(st.get, st.create, func(b []byte) error {
			for i := range b {
				b[i] = 0xAA
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	loser, err := EnsureKey(st.get, st.create, counter())
	if err != nil {
		t.Fatal(err)
	}
	if len(winner) != 1 || loser[0].ID != winner[0].ID || !bytes.Equal(loser[0].Secret, winner[0].Secret) {
		t.Fatalf("loser has %v, winner %v", loser, winner)
	}
	b := testBind(t)
	if _, err := Open(winner, Seal(&loser[0], &b), now); err != nil {
		t.Fatalf("the winner cannot open the loser's state: %v", err)
	}
	// Concurrent creation on real goroutines: one key for all.
	st = &memStore{}
	var wg sync.WaitGroup
	got := make([][]Key, 8)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i], _ = EnsureKey(st.get, st.create, func(b []byte) error {
				for j := range b {
					b[j] = byte(i + 1)
				}
				return nil
			})
		}(i)
	}
	wg.Wait()
	for i := range got {
		if len(got[i]) != 1 || !bytes.Equal(got[i][0].Secret, got[0][0].Secret) {
			t.Fatalf("replica %d has another key", i)
		}
	}
}

func TestEnsureKey_errors(t *testing.T) {
	bad := &memStore{value: []byte("not a key")}
	if _, err := EnsureKey(bad.get, bad.create, counter()); !errors.Is(err, ErrKeyStore) {
		t.Errorf("a corrupt stored key: %v", err)
	}
	failing := errors.New("store down")
	if _, err := EnsureKey(func() ([]byte, bool, error) { return nil, false, failing }, nil, counter()); !errors.Is(err, failing) {
		t.Errorf("a failing get: %v", err)
	}
	if _, err := EnsureKey(func() ([]byte, bool, error) { return nil, false, nil }, func([]byte) (bool, error) { return false, nil }, counter()); !errors.Is(err, ErrKeyStore) {
		t.Errorf("a key never found nor created: %v", err)
	}
}

func TestParseKeys_rotation(t *testing.T) {
	keys := []Key{testKey("new", 1), testKey("old", 2)}
	got, err := ParseKeys(FormatKeys(keys))
	if err != nil || len(got) != 2 || got[0].ID != "new" || !bytes.Equal(got[1].Secret, keys[1].Secret) {
		t.Fatalf("ParseKeys = %v, %v", got, err)
	}
	b := testBind(t)
	if _, err := Open(got, Seal(&keys[1], &b), now); err != nil {
		t.Fatalf("a state of the older key: %v", err)
	}
}

func TestScopeOf(t *testing.T) {
	scopes := []string{
		ScopeOf(nil),
		ScopeOf([]string{""}),
		ScopeOf([]string{"Bearer a"}),
		ScopeOf([]string{"Bearer a"}, nil),
		ScopeOf([]string{"Bearer a"}, []string{""}),
		ScopeOf([]string{"Bearer a", "Bearer b"}),
		ScopeOf([]string{"Bearer a"}, []string{"Bearer b"}),
		ScopeOf([]string{"Bearer aBearer b"}),
	}
	for i := range scopes {
		for j := range scopes {
			if i != j && scopes[i] == scopes[j] {
				t.Errorf("scopes %d and %d are the same", i, j)
			}
		}
	}
	if ScopeOf([]string{"Bearer a"}, nil) != ScopeOf([]string{"Bearer a"}, nil) {
		t.Error("ScopeOf is not deterministic")
	}
}

// TestSealCont: a continuation binds as the yes does and carries the server's state back
// byte for byte; it is never taken for a yes, nor a yes for it; a server's state over
// MaxCarried (or none) is not carried; any change to it is refused.
func TestSealCont(t *testing.T) {
	k := testKey("k1", 7)
	b := testBind(t)
	carried := `opaque "state" \ with ünicode ` + strings.Repeat("x", 100)
	c := SealCont(&k, &b, carried)
	if !strings.HasPrefix(c, ContPrefix) {
		t.Fatalf("SealCont = %q", c)
	}
	st, err := OpenCont([]Key{k}, c, now)
	if err != nil {
		t.Fatal(err)
	}
	if st.Carried != carried || st.Tool != b.Tool || st.Nonce != b.Nonce || st.Expiry != b.Expiry {
		t.Fatalf("OpenCont = %+v", st)
	}
	if err := st.Match(&b); err != nil {
		t.Fatalf("Match: %v", err)
	}
	other := b
	other.Principal = "mallory"
	if err := st.Match(&other); !errors.Is(err, ErrMismatch) {
		t.Fatalf("Match of another principal: %v", err)
	}
	// Neither kind is taken for the other, even with the prefix swapped.
	yes := Seal(&k, &b)
	if _, err := Open([]Key{k}, c, now); err == nil {
		t.Error("Open accepted a continuation")
	}
	if _, err := OpenCont([]Key{k}, yes, now); err == nil {
		t.Error("OpenCont accepted a yes")
	}
	if _, err := OpenCont([]Key{k}, ContPrefix+yes[len(Prefix):], now); err == nil {
		t.Errorf("OpenCont of a yes's payload under the continuation's prefix: %v", err)
	}
	if _, err := Open([]Key{k}, Prefix+c[len(ContPrefix):], now); err == nil {
		t.Errorf("Open of a continuation's payload under the yes's prefix: %v", err)
	}
	if _, err := OpenCont([]Key{k}, c, b.Expiry); !errors.Is(err, ErrExpired) {
		t.Errorf("expired: %v", err)
	}
	if _, err := OpenCont([]Key{testKey("k1", 8)}, c, now); !errors.Is(err, ErrForged) {
		t.Errorf("another key: %v", err)
	}
	if _, err := OpenCont([]Key{k}, c[:len(c)-1]+"A", now); err == nil {
		t.Error("a tampered MAC was accepted")
	}
	// The bound: MaxCarried is carried, one byte more (or nothing) is not.
	big := strings.Repeat("s", MaxCarried)
	b.Tool = strings.Repeat("t", MaxTool)
	c = SealCont(&k, &b, big)
	if c == "" || len(c) > maxCont {
		t.Fatalf("SealCont of MaxCarried bytes: %d bytes (bound %d)", len(c), maxCont)
	}
	if st, err := OpenCont([]Key{k}, c, now); err != nil || st.Carried != big {
		t.Fatalf("OpenCont of MaxCarried bytes: %v", err)
	}
	if SealCont(&k, &b, big+"s") != "" || SealCont(&k, &b, "") != "" {
		t.Error("SealCont carried a state over MaxCarried, or none")
	}
	if _, err := OpenCont([]Key{k}, c+strings.Repeat("A", maxCont), now); !errors.Is(err, ErrMalformed) {
		t.Errorf("over maxCont: %v", err)
	}
}

// TestContinuation_wrap: Wrap seals with a fresh nonce and its own expiry each time.
func TestContinuation_wrap(t *testing.T) {
	k := testKey("k1", 7)
	g := &Gate{Random: counter()}
	c := &Continuation{g: g, k: &k, b: testBind(t), ttl: 1000}
	at := time.UnixMilli(now)
	w1, w2 := c.Wrap("S", at), c.Wrap("S", at)
	s1, err1 := OpenCont([]Key{k}, w1, now)
	s2, err2 := OpenCont([]Key{k}, w2, now)
	if err1 != nil || err2 != nil || s1.Nonce == s2.Nonce || s1.Expiry != now+1000 || UsedKey(s1) == UsedKey(s2) {
		t.Fatalf("Wrap: %v %v %+v %+v", err1, err2, s1, s2)
	}
	if c.Wrap(strings.Repeat("s", MaxCarried+1), at) != "" {
		t.Error("Wrap of a state over MaxCarried")
	}
}
