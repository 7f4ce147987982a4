package approval

import (
	"errors"
	"strings"
	"testing"
)

// FuzzReadState: Open (and OpenCont, for a continuation) never panics, and never accepts a state whose MAC does not verify:
// whatever it accepts is byte for byte a state the key seals for what it returned.
func FuzzReadState(f *testing.F) {
	k := testKey("k1", 7)
	b := Bind{Tool: "delete_file", Principal: "alice", Scope: "s", Workflow: "w", Expiry: now + 1000, Nonce: [NonceLen]byte{9}}
	b.ArgsDigest, _ = ArgsDigest([]byte(`{"path":"/etc/passwd"}`))
	good := Seal(&k, &b)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(strings.Replace(good, "A", "B", 1))
	f.Add("sg1.")
	f.Add("sg1..")
	f.Add("sg1.AQJrMQ.")
	f.Add("sg2." + good[4:])
	f.Add("")
	cont := SealCont(&k, &b, "server-state")
	f.Add(cont)
	f.Add(strings.Replace(cont, "A", "B", 1))
	f.Add("sgc1.")
	f.Fuzz(func(t *testing.T, s string) {
		open, prefix := Open, Prefix
		if strings.HasPrefix(s, ContPrefix) {
			open, prefix = OpenCont, ContPrefix
		}
		st, err := open([]Key{k}, s, now)
		if err != nil {
			if st != nil {
				t.Fatalf("Open(%q) returned a state with %v", s, err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrForged) && !errors.Is(err, ErrExpired) {
				t.Fatalf("Open(%q) = %v: not one of the documented errors", s, err)
			}
			return
		}
		// Accepted: the MAC verified, so s must be exactly what Seal makes of its content.
		dot := strings.LastIndexByte(s, '.')
		if dot < 0 || !strings.HasPrefix(s, prefix) {
			t.Fatalf("Open accepted %q", s)
		}
		mac, err := b64.DecodeString(s[dot+1:])
		if err != nil || string(mac) != string(k.mac([]byte(s[:dot]))) {
			t.Fatalf("Open accepted %q whose MAC does not verify", s)
		}
		if st.Expiry <= now || st.Tool == "" {
			t.Fatalf("Open accepted %q: %+v", s, st)
		}
	})
}

// FuzzReadAnswer: ReadAnswer never panics, and a yes always has an accepting action and a
// true approve in the input.
func FuzzReadAnswer(f *testing.F) {
	f.Add(`{"dev.stategate/approval":{"action":"accept","content":{"approve":true}}}`)
	f.Add(`{"dev.stategate/approval":{"action":"decline"}}`)
	f.Add(`{"dev.stategate/approval":{"action":"accept","content":{"approve":true,"approve":false}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		if ReadAnswer([]byte(s)) == Accept && (!strings.Contains(s, "true") || !strings.Contains(s, "accept")) {
			t.Fatalf("ReadAnswer(%q) = accept", s)
		}
	})
}
