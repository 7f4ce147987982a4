package approval

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Key is an HMAC key of requestStates. ID names it inside every state it signs, so that
// keys can rotate: Seal with the newest, Open with every key still accepted.
type Key struct {
	ID     string // 1-16 bytes of [A-Za-z0-9_-]
	Secret []byte // at least 32 bytes
}

// SecretLen is the length of a secret EnsureKey creates.
const SecretLen = 32

func (k *Key) valid() bool {
	return k != nil && len(k.Secret) >= SecretLen && validID(k.ID)
}

func validID(id string) bool {
	if id == "" || len(id) > 16 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (k *Key) mac(msg []byte) []byte {
	h := hmac.New(sha256.New, k.Secret)
	h.Write(msg)
	return h.Sum(nil)
}

// tags are the keyed tags of b's arguments, principal, scope and workflow: each field
// under its own label, so that no value can stand for another field's.
func (k *Key) tags(b *Bind) (t [4][tagLen]byte) {
	fields := [4]string{string(b.ArgsDigest[:]), b.Principal, b.Scope, b.Workflow}
	for i, label := range [...]string{"arguments", "principal", "scope", "workflow"} {
		h := hmac.New(sha256.New, k.Secret)
		h.Write([]byte("stategate/approval/v1\x00" + label + "\x00"))
		h.Write([]byte(fields[i]))
		copy(t[i][:], h.Sum(nil))
	}
	return t
}

// ArgsDigest is the SHA-256 of the arguments in canonical JSON (jsonx.AppendCanonical:
// member order, whitespace and string escapes do not count, every number literal does);
// absent or null arguments are {}. ok is false for arguments that have no canonical form
// (a repeated member, an unpaired surrogate escape, invalid UTF-8): bind no yes to them.
func ArgsDigest(args []byte) (d [32]byte, ok bool) {
	in := []byte("{}")
	if len(strings.TrimSpace(string(args))) > 0 {
		if jsonx.Validate(args, abi.MaxDepth) != nil {
			return d, false
		}
		if v := gjson.ParseBytes(args); v.Type != gjson.Null {
			var err error
			if in, err = jsonx.AppendCanonical(nil, v); err != nil {
				return d, false
			}
		}
	}
	return sha256.Sum256(in), true
}

// WorkflowOf is Bind.Workflow for the workflow keys a call is gated by and the snapshots
// read at admission (nil for an absent key), in the order given: any move of any of them
// (every stored snapshot carries its seq) changes it.
func WorkflowOf(keys []string, snapshots [][]byte) string {
	h := sha256.New()
	for i, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		if i < len(snapshots) && snapshots[i] != nil {
			d := sha256.Sum256(snapshots[i])
			h.Write([]byte{1})
			h.Write(d[:])
		} else {
			h.Write([]byte{0})
		}
	}
	return string(h.Sum(nil))
}

// ScopeOf is Bind.Scope for the caller's credentials: the values of each credential
// header, in a fixed order (the cache's: authorization, the principal header, then
// cache.varyHeaders; nil for an absent header), each length-prefixed, so that no two
// lists share a scope and an absent header differs from one sent empty. The secrets in it
// never leave the gateway: a state carries only its keyed tag.
func ScopeOf(headers ...[]string) string {
	var b []byte
	for _, values := range headers {
		b = binary.BigEndian.AppendUint32(b, uint32(len(values)))
		for _, v := range values {
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return string(b)
}

// The stored form of the gateway's keys: "sg1k <id> <base64url secret>" per line, the
// newest first.
const keyLine = "sg1k "

// ErrKeyStore is wrapped by EnsureKey's errors about the stored keys.
var ErrKeyStore = errors.New("approval: key store")

// ParseKeys reads the stored keys (abi.ApprovalSecretKey's value), newest first.
func ParseKeys(raw []byte) ([]Key, error) {
	var keys []Key
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		rest, ok := strings.CutPrefix(line, keyLine)
		id, enc, ok2 := strings.Cut(rest, " ")
		secret, err := b64.DecodeString(enc)
		k := Key{ID: id, Secret: secret}
		if !ok || !ok2 || err != nil || !k.valid() {
			return nil, errors.Join(ErrKeyStore, errors.New("approval: stored key is not \"sg1k <id> <secret>\""))
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// FormatKeys is the stored form of keys, newest first.
func FormatKeys(keys []Key) []byte {
	var b []byte
	for _, k := range keys {
		b = append(b, keyLine...)
		b = append(b, k.ID...)
		b = append(b, ' ')
		b = b64.AppendEncode(b, k.Secret)
		b = append(b, '\n')
	}
	return b
}

// EnsureKey returns the gateway's keys (newest first), creating the first once. get reads
// abi.ApprovalSecretKey (ok false when absent); create stores value there only if it is
// still absent, reporting false when another writer came first; random fills its
// argument with random bytes. Two replicas racing both end with the winner's key.
func EnsureKey(get func() (value []byte, ok bool, err error), create func(value []byte) (bool, error), random func([]byte) error) ([]Key, error) {
	for attempt := 0; attempt < 3; attempt++ {
		raw, ok, err := get()
		if err != nil {
			return nil, err
		}
		if ok {
			return ParseKeys(raw)
		}
		secret := make([]byte, SecretLen+4)
		if err := random(secret); err != nil {
			return nil, err
		}
		id := b64.EncodeToString(secret[SecretLen:]) // 6 characters naming the key
		keys := []Key{{ID: id, Secret: secret[:SecretLen]}}
		created, err := create(FormatKeys(keys))
		if err != nil {
			return nil, err
		}
		if created {
			return keys, nil
		}
		// Another replica created it first: read the winner's.
	}
	return nil, errors.Join(ErrKeyStore, errors.New("approval: the key was neither found nor created"))
}
