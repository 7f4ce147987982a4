package guest

import (
	"sort"
	"strconv"
	"strings"

	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// restoreScalars gives back their types to the numbers and booleans of a configuration
// document that a host handed over as strings: Traefik's file provider decodes a plugin's
// configuration into strings at every leaf ("version": "1"), and the engine refuses those.
// Only a value the engine refuses, at the path it names, that is a string reading exactly
// as a JSON number, true or false, is rewritten (unquoted); a string the engine accepts
// stays a string (a state named "2"). At most a few rounds: each round takes every error
// the engine lists.
//
// # Notes
//
//   - Traefik also turns an empty map or list into "": where the engine wants an object or
//     an array and finds "", it gets {} or []. An empty map Traefik drops is the engine's
//     to name (the refusal says where).
func restoreScalars(doc []byte) []byte {
	for range 4 {
		type edit struct {
			at, n int
			with  string
		}
		var edits []edit
		gjson.GetBytes(engine.CheckConfig(doc), "errors").ForEach(func(_, e gjson.Result) bool {
			path, msg, ok := strings.Cut(e.String(), ": ")
			if !ok {
				return true
			}
			gp, ok := gjsonPath(path)
			if !ok {
				return true
			}
			v := gjson.GetBytes(doc, gp)
			if v.Type != gjson.String || v.Index <= 0 || v.Index+len(v.Raw) > len(doc) || string(doc[v.Index:v.Index+len(v.Raw)]) != v.Raw {
				return true
			}
			switch s, ok := scalar(v.Str); {
			case ok:
				edits = append(edits, edit{v.Index, len(v.Raw), s})
			case v.Str == "" && strings.HasPrefix(msg, "must be an object"):
				edits = append(edits, edit{v.Index, len(v.Raw), "{}"}) // an empty map, emptied to ""
			case v.Str == "" && strings.HasPrefix(msg, "must be an array"):
				edits = append(edits, edit{v.Index, len(v.Raw), "[]"})
			}
			return true
		})
		if len(edits) == 0 {
			return doc
		}
		sort.Slice(edits, func(i, j int) bool { return edits[i].at > edits[j].at })
		out := append([]byte(nil), doc...)
		last := len(out) + 1
		for _, e := range edits {
			if e.at+e.n > last { // overlapping (never, for leaves): leave it
				continue
			}
			out = append(out[:e.at], append([]byte(e.with), out[e.at+e.n:]...)...)
			last = e.at
		}
		doc = out
	}
	return doc
}

// scalar reports whether s is exactly a JSON number or boolean, as written.
func scalar(s string) (string, bool) {
	if s == "true" || s == "false" {
		return s, true
	}
	if s == "" || len(s) > 32 {
		return "", false
	}
	r := gjson.Parse(s)
	if r.Type == gjson.Number && r.Raw == s && gjson.Valid(s) {
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return s, true
		}
	}
	return "", false
}

// gjsonPath turns a path of the engine's messages (limits.tools["a.b"].timeoutMs,
// workflows[0].states.s) into a gjson path; ok is false for what it cannot read.
func gjsonPath(p string) (string, bool) {
	var parts []string
	for i := 0; i < len(p); {
		switch p[i] {
		case '.':
			i++
		case '[':
			if i+1 < len(p) && p[i+1] == '"' {
				// A quoted name: a JSON string up to its closing quote, then ']'.
				j := i + 2
				for j < len(p) && p[j] != '"' {
					if p[j] == '\\' {
						j++
					}
					j++
				}
				if j+1 >= len(p) || p[j+1] != ']' {
					return "", false
				}
				name, err := strconv.Unquote(p[i+1 : j+1])
				if err != nil {
					return "", false
				}
				parts = append(parts, gjson.Escape(name))
				i = j + 2
			} else {
				j := strings.IndexByte(p[i:], ']')
				if j < 0 {
					return "", false
				}
				n := p[i+1 : i+j]
				if _, err := strconv.Atoi(n); err != nil {
					return "", false
				}
				parts = append(parts, n)
				i += j + 1
			}
		default:
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			parts = append(parts, gjson.Escape(p[i:j]))
			i = j
		}
	}
	if len(parts) == 0 {
		return "", false
	}
	return strings.Join(parts, "."), true
}
