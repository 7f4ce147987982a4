// Package approval binds a person's yes to one tools/call: the signed, single-use
// requestState of a 2026-07-28 input_required answer, the elicitation form that asks for
// the yes, the reading of the answer, and the gateway's approval key in its store.
//
// Standard Go without I/O (hosts hand it bytes and callbacks) that also builds with TinyGo:
// no reflection, no encoding/json.
//
// # Notes
//
//   - A state is "sg1." + base64url(payload) + "." + base64url(HMAC-SHA256(key, "sg1." +
//     base64url(payload))), unpadded, at most MaxState bytes. The payload is binary:
//     format 1, the key's id, the expiry (unix ms), a random nonce, the tool name, and a
//     16-byte keyed tag of each of the arguments' digest, the principal, the credentials'
//     scope and the workflow state. Tags, not values: the client reads the payload, and
//     must learn nothing it did not send (credentials, the principal an auth proxy set).
//   - Reading a state is hostile-input parsing: Open verifies the MAC before it reads
//     anything but the key id, and never panics.
//   - Single use is the caller's: claim UsedKey(state) by compare-and-set against absent
//     before forwarding; a lost race is a replay.
//   - A continuation (SealCont) carries a server's own requestState on through the gateway
//     when the server answers a call let through on a yes with input_required: "sgc1." and
//     format 2, the same binding and layout followed by the server's state, so that neither
//     can be taken for the other. The client sees the server's state in it (it saw it before).
package approval

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/stategate/stategate/abi"
)

// Format and bounds of a state.
const (
	Prefix   = "sg1."
	MaxState = 1024 // bytes of an encoded state
	MaxTool  = 512  // bytes of a tool name a state can bind
	NonceLen = 16
	tagLen   = 16
	macLen   = sha256.Size
	format   = 1

	ContPrefix = "sgc1."
	MaxCarried = 16 << 10 // bytes of a server's requestState a continuation carries
	formatCont = 2
	maxCont    = 23 << 10 // bytes of an encoded continuation: MaxCarried and the binding, in base64url
)

// Bind is what a yes is bound to: one call, by one caller, in one workflow state, until
// Expiry. Scope and Workflow are opaque strings the caller builds the same way on the
// question and on the retry (Workflow: WorkflowOf).
type Bind struct {
	Tool       string
	ArgsDigest [32]byte // ArgsDigest of the call's arguments
	Principal  string
	Scope      string // the credentials' scope: ScopeOf the caller's credential headers
	Workflow   string // WorkflowOf the workflow keys the call is gated by, as read at admission
	Expiry     int64  // unix ms
	Nonce      [NonceLen]byte
}

// State is a verified requestState: what it binds, as keyed tags, and the key that
// signed it.
type State struct {
	KeyID  string
	Tool   string
	Expiry int64
	Nonce  [NonceLen]byte
	// Carried is the server's requestState a continuation carries ("" in a yes's state).
	Carried string
	tags    [4][tagLen]byte // arguments, principal, scope, workflow
	key     *Key
}

// Errors of Open and Match. Every error of Open wraps exactly one of ErrMalformed,
// ErrForged and ErrExpired; every error of Match wraps ErrMismatch.
var (
	ErrMalformed = errors.New("approval: malformed state")
	ErrForged    = errors.New("approval: state not signed by this gateway")
	ErrExpired   = errors.New("approval: state expired")
	ErrMismatch  = errors.New("approval: state is for another call")
)

// MismatchError names what differs between the call and its state.
type MismatchError struct {
	Field string // "tool", "arguments", "principal", "scope" or "workflow"
}

func (e *MismatchError) Error() string {
	return "approval: state is for another " + e.Field
}

// Unwrap lets errors.Is(err, ErrMismatch) hold.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

var b64 = base64.RawURLEncoding.Strict()

// Seal returns the requestState binding b, signed with k. It returns "" when b cannot be
// bound (a tool name over MaxTool, an unusable key): ask nobody, refuse the call.
func Seal(k *Key, b *Bind) string {
	return seal(k, b, Prefix, format, "")
}

// SealCont returns the continuation binding b and carrying the server's requestState
// carried, signed with k: "" when carried is empty or over MaxCarried, or b cannot be bound.
func SealCont(k *Key, b *Bind, carried string) string {
	if carried == "" || len(carried) > MaxCarried {
		return ""
	}
	return seal(k, b, ContPrefix, formatCont, carried)
}

func seal(k *Key, b *Bind, prefix string, f byte, carried string) string {
	if !k.valid() || len(b.Tool) > MaxTool || b.Tool == "" {
		return ""
	}
	p := make([]byte, 0, 2+len(k.ID)+8+NonceLen+2+len(b.Tool)+4*tagLen+len(carried))
	p = append(p, f, byte(len(k.ID)))
	p = append(p, k.ID...)
	p = binary.BigEndian.AppendUint64(p, uint64(b.Expiry))
	p = append(p, b.Nonce[:]...)
	p = binary.BigEndian.AppendUint16(p, uint16(len(b.Tool)))
	p = append(p, b.Tool...)
	for _, t := range k.tags(b) {
		p = append(p, t[:]...)
	}
	p = append(p, carried...)
	s := make([]byte, 0, len(prefix)+b64.EncodedLen(len(p))+1+b64.EncodedLen(macLen))
	s = append(s, prefix...)
	s = b64.AppendEncode(s, p)
	mac := k.mac(s)
	s = append(s, '.')
	s = b64.AppendEncode(s, mac)
	return string(s)
}

// Open verifies s with the key it names among keys and returns what it binds. now is
// unix ms; a state is good until its expiry, exclusive.
func Open(keys []Key, s string, now int64) (*State, error) {
	return open(keys, s, now, Prefix, format, MaxState)
}

// OpenCont verifies the continuation s as Open does a state; the state it returns
// carries the server's requestState (Carried).
func OpenCont(keys []Key, s string, now int64) (*State, error) {
	return open(keys, s, now, ContPrefix, formatCont, maxCont)
}

func open(keys []Key, s string, now int64, prefix string, f byte, max int) (*State, error) {
	if len(s) > max {
		return nil, malformed("over " + strconv.Itoa(max) + " bytes")
	}
	if !strings.HasPrefix(s, prefix) {
		if i := strings.IndexByte(s, '.'); i > 0 && i < 8 && strings.HasPrefix(s, "sg") {
			return nil, malformed("unknown version " + strconv.Quote(s[:i]))
		}
		return nil, malformed("not a stategate state")
	}
	dot := strings.LastIndexByte(s, '.')
	if dot < len(prefix) {
		return nil, malformed("no signature")
	}
	payload, err := b64.DecodeString(s[len(prefix):dot])
	if err != nil {
		return nil, malformed("payload is not base64url")
	}
	mac, err := b64.DecodeString(s[dot+1:])
	if err != nil || len(mac) != macLen {
		return nil, malformed("signature is not a base64url HMAC-SHA256")
	}
	// The key id, the one thing read before the MAC is checked.
	if len(payload) < 2 || payload[0] != f || len(payload) < 2+int(payload[1]) {
		return nil, malformed("payload header")
	}
	id := string(payload[2 : 2+int(payload[1])])
	var k *Key
	for i := range keys {
		if keys[i].ID == id && keys[i].valid() {
			k = &keys[i]
			break
		}
	}
	if k == nil || !hmac.Equal(k.mac([]byte(s[:dot])), mac) {
		return nil, ErrForged
	}
	// Signed by this gateway: the layout is its own, but check every length anyway.
	st := &State{KeyID: k.ID, key: k}
	rest := payload[2+len(id):]
	if len(rest) < 8+NonceLen+2 {
		return nil, malformed("payload too short")
	}
	st.Expiry = int64(binary.BigEndian.Uint64(rest))
	copy(st.Nonce[:], rest[8:])
	rest = rest[8+NonceLen:]
	n := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if n == 0 || n > MaxTool || len(rest) < n+4*tagLen || (len(rest) > n+4*tagLen) != (f == formatCont) {
		return nil, malformed("payload length")
	}
	st.Tool = string(rest[:n])
	st.Carried = string(rest[n+4*tagLen:])
	rest = rest[n:]
	for i := range st.tags {
		copy(st.tags[i][:], rest[i*tagLen:])
	}
	if now >= st.Expiry {
		return nil, ErrExpired
	}
	return st, nil
}

// Match reports whether want is the call st was issued for: a *MismatchError naming the
// first of tool, arguments, principal, scope and workflow that differs, or nil. Expiry
// and Nonce of want are not compared (they are the state's own).
func (st *State) Match(want *Bind) error {
	if st == nil || st.key == nil {
		return &MismatchError{Field: "tool"}
	}
	if !hmac.Equal([]byte(st.Tool), []byte(want.Tool)) {
		return &MismatchError{Field: "tool"}
	}
	tags := st.key.tags(want)
	for i, field := range [...]string{"arguments", "principal", "scope", "workflow"} {
		if !hmac.Equal(st.tags[i][:], tags[i][:]) {
			return &MismatchError{Field: field}
		}
	}
	return nil
}

// UsedKey is the store key that marks st spent: claim it by compare-and-set against
// absent before forwarding the call (a lost race is a replay). The expiry's minute leads
// the nonce, so that a sweep can drop the marks of expired states by prefix.
func UsedKey(st *State) string {
	minute := st.Expiry / 60000
	if minute < 0 {
		minute = 0
	}
	return abi.ApprovalUsedPrefix + strconv.FormatInt(minute, 10) + "/" + hex.EncodeToString(st.Nonce[:])
}

func malformed(why string) error {
	return &malformedError{why}
}

type malformedError struct{ why string }

func (e *malformedError) Error() string { return "approval: malformed state: " + e.why }
func (e *malformedError) Unwrap() error { return ErrMalformed }
