package cache

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// callerKeys folds the caller's credentials into response-cache keys, so callers with
// other credentials never share an entry or a flight, while the same credentials still
// hit. The credentials are the request's Authorization header, the configured principal
// header and every header of cache.varyHeaders (check_config's host facts).
//
// # Notes
//
//   - A key is HMAC-SHA256, under a random secret of this Core, of the engine's key and
//     every credential header: no credential is kept or logged in clear, and a key seen
//     anywhere cannot be tested against guessed tokens without the secret. Entries and
//     flights live in this Core only, so nothing else needs the secret.
//   - Each header counts by all of its values in order (a repeated header is not its first
//     value), and an absent header differs from one sent empty.
type callerKeys struct {
	secret [32]byte
	names  []string // lower case, each once: authorization, the principal header, varyHeaders
}

func newCallerKeys(principal string, vary []string) *callerKeys {
	k := &callerKeys{names: []string{"authorization"}}
	for _, n := range append([]string{principal}, vary...) {
		n = strings.ToLower(n)
		if n != "" && !containsName(k.names, n) {
			k.names = append(k.names, n)
		}
	}
	rand.Read(k.secret[:]) // never fails: crypto/rand ends the program rather than return an error
	return k
}

// key returns the cache key of a call the engine keyed engineKey, made by the caller whose
// request headers are h (nil: a host that has none, every header absent).
func (k *callerKeys) key(engineKey string, h Headers) string {
	m := hmac.New(sha256.New, k.secret[:])
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		m.Write(n[:])
		m.Write([]byte(s))
	}
	field(engineKey)
	for _, name := range k.names {
		field(name)
		values := headerValues(h, name)
		binary.BigEndian.PutUint64(n[:], uint64(len(values))) // 0: absent, unlike one empty value
		m.Write(n[:])
		for _, v := range values {
			field(v)
		}
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Headers reads request headers by name, case-insensitively, every field line of a name
// in order (exchange.Headers and http.Header satisfy it).
type Headers interface {
	Values(name string) []string
}

// headerValues returns every value of the header name in h, in order; nil when absent.
func headerValues(h Headers, name string) []string {
	if h == nil {
		return nil
	}
	return h.Values(name)
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}
