package flow

import "strings"

// Headers are header fields in order, as [name, value] pairs: a header sent twice is two
// pairs. They satisfy exchange.Headers (names compare case-insensitively).
type Headers [][2]string

// Get returns the first value of name ("" when absent).
func (h Headers) Get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f[0], name) {
			return f[1]
		}
	}
	return ""
}

// Values returns every value of name, in order.
func (h Headers) Values(name string) []string {
	var out []string
	for _, f := range h {
		if strings.EqualFold(f[0], name) {
			out = append(out, f[1])
		}
	}
	return out
}

// Has reports whether name is present.
func (h Headers) Has(name string) bool {
	for _, f := range h {
		if strings.EqualFold(f[0], name) {
			return true
		}
	}
	return false
}

// Del returns h without name.
func (h Headers) Del(name string) Headers {
	if !h.Has(name) {
		return h // nothing to drop: Headers are never changed in place
	}
	out := make(Headers, 0, len(h)-1)
	for _, f := range h {
		if !strings.EqualFold(f[0], name) {
			out = append(out, f)
		}
	}
	return out
}

// Set returns h with name set to the one value v (replacing the first, dropping others).
func (h Headers) Set(name, v string) Headers {
	out := make(Headers, 0, len(h)+1)
	set := false
	for _, f := range h {
		if !strings.EqualFold(f[0], name) {
			out = append(out, f)
		} else if !set {
			out, set = append(out, [2]string{f[0], v}), true
		}
	}
	if !set {
		out = append(out, [2]string{name, v})
	}
	return out
}

// With returns h with each of set's [name, value] set as Set sets it (replacing the
// first field of the name, dropping the others, or appended in set's order), and without
// the names in drop: one copy for what a chain of Set and Del would copy each time.
func (h Headers) With(drop []string, set ...[2]string) Headers {
	return edit(h, false, nil, drop, set)
}

// edit copies h without the names in drop, with set applied (With), and, for endToEnd,
// without the hop-by-hop headers and those in named.
func edit(h Headers, endToEnd bool, named, drop []string, set [][2]string) Headers {
	out := make(Headers, 0, len(h)+len(set))
	var done uint64 // bit i: set[i] is in out
next:
	for _, f := range h {
		if endToEnd && (isIn(f[0], named) || isIn(f[0], hop)) || isIn(f[0], drop) {
			continue
		}
		for i, kv := range set {
			if strings.EqualFold(f[0], kv[0]) {
				if done&(1<<i) == 0 {
					done |= 1 << i
					out = append(out, [2]string{f[0], kv[1]})
				}
				continue next
			}
		}
		out = append(out, f)
	}
	for i, kv := range set {
		if done&(1<<i) == 0 {
			out = append(out, kv)
		}
	}
	return out
}

// hop are the hop-by-hop headers a proxy never passes on (RFC 9110 7.6.1), and
// Content-Length, which the side that writes the body sets.
var hop = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Content-Length", "Proxy-Connection"}

// EndToEnd returns h without hop-by-hop headers, those named in Connection included.
func EndToEnd(h Headers) Headers { return endToEnd(h, nil) }

// endToEnd is EndToEnd(h).With(drop, set...) in one copy.
func endToEnd(h Headers, drop []string, set ...[2]string) Headers {
	var named []string // the names Connection lists
	for _, f := range h {
		if !strings.EqualFold(f[0], "Connection") {
			continue
		}
		for v := f[1]; v != ""; {
			var n string
			n, v, _ = strings.Cut(v, ",")
			if n = strings.TrimSpace(n); n != "" {
				named = append(named, n)
			}
		}
	}
	return edit(h, true, named, drop, set)
}

// isIn reports whether name is one of names (case-insensitively).
func isIn(name string, names []string) bool {
	for _, n := range names {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}
