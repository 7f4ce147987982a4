package store

import "strings"

// layout names the Redis keys of a store: the value of an engine key, the set of a session's
// keys, the lease on a key.
//
// # Notes
//
//   - flat (redis://, redis+sentinel://) is the layout single servers have always used:
//     "stategate:key:<key>", "stategate:session:<id>", "stategate:lock:<key>". A server
//     only has one slot space, so nothing needs grouping, and existing data stays readable.
//   - tagged (redis+cluster://) puts a hash tag in every name: "stategate:{<tag>}:key:<key>",
//     "stategate:{<tag>}:lock:<key>" and "stategate:{<tag>}:session", with the tag from
//     slotTag/sessionTag. Redis Cluster hashes only the tag, so the value, the lease and the
//     session set that belong together share one slot and every script stays in it.
type layout struct{ tagged bool }

func (l layout) valueKey(key string) string {
	if !l.tagged {
		return redisKeyPrefix + key
	}
	return "stategate:{" + slotTag(key) + "}:key:" + key
}

func (l layout) lockKey(key string) string {
	if !l.tagged {
		return redisLockPrefix + key
	}
	return "stategate:{" + slotTag(key) + "}:lock:" + key
}

func (l layout) sessionKey(session string) string {
	if !l.tagged {
		return redisSessionPrefix + escapeSession(session)
	}
	return "stategate:{" + sessionTag(session) + "}:session"
}

// slotTag is the hash tag of an engine key: the unit whose keys live together.
//
//	stategate/v1/<workflow>/session/<principal>/<session> → "session/<session>"
//	stategate/v1/<namespace>/<rest>                       → "<rest>"
//	any other key                                         → the key itself
//
// so every workflow's state of one session shares a slot with the session's set (Forget and
// the compare-and-set script stay in it), every workflow's state under one handle
// (arg.<name>/<principal>/<handle>) shares a slot, and a per-tool key
// (stategate/v1/health/tool/<name>, stategate/v1/cache/tool/<name>) shares one with the
// other per-tool keys of that tool. Sessions, handles and tools spread over the slots, and so
// over the shards. The tag is percent-encoded (escapeTag) so it never holds '{' or '}'.
func slotTag(key string) string {
	rest, ok := strings.CutPrefix(key, "stategate/v1/")
	if !ok {
		return escapeTag(key)
	}
	_, rest, ok = strings.Cut(rest, "/") // the workflow or namespace
	if !ok || rest == "" {
		return escapeTag(key)
	}
	if kind, scope, ok := strings.Cut(rest, "/"); ok && kind == "session" {
		// session/<principal>/<id>: the session set knows the id only.
		if i := strings.LastIndexByte(scope, '/'); i >= 0 {
			return sessionTag(unescapeEngine(scope[i+1:]))
		}
	}
	return escapeTag(rest)
}

// sessionTag is the hash tag of a session's set and of its session-keyed state.
func sessionTag(session string) string { return "session/" + escapeTag(session) }

// escapeTag percent-encodes every byte outside [A-Za-z0-9._~/-], so a tag never holds the
// braces that delimit it.
func escapeTag(s string) string { return percentEncode(s, true) }

// percentEncode writes every byte of s outside [A-Za-z0-9._~-] (and '/', with slash) as
// %XX, upper-case.
func percentEncode(s string, slash bool) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == '~', c == '-', c == '/' && slash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// unescapeEngine undoes the engine's percent-encoding of a key segment; a malformed escape
// is kept as it is (the tag is then still a function of the key alone).
func unescapeEngine(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if h, ok1 := unhex(s[i+1]); ok1 {
				if l, ok2 := unhex(s[i+2]); ok2 {
					b = append(b, h<<4|l)
					i += 2
					continue
				}
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// slot is the Redis Cluster hash slot of a Redis key: CRC16 (XMODEM) of its hash tag, or
// of the whole key when it has none, modulo 16384.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^key[i]]
	}
	return int(crc) & 16383
}

var crc16tab = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
