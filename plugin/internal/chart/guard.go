package chart

import (
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/tidwall/gjson"
)

// Pass evaluates guard g for ev (nil for a done event, which carries no arguments and
// no result); a nil guard always passes.
//
// # Notes
//
//   - A path reads object members (the last of a repeated name, as JSON.parse) and array
//     items by index ("items.0"); anything else reads as absent.
//   - eq, ne and in compare as JavaScript's ===, on strings, numbers, booleans and null;
//     lt, lte, gt and gte need a number; exists passes for any present value, null too.
func Pass(g *config.Guard, ev *Event) bool {
	return pass(g, ev, 0)
}

func pass(g *config.Guard, ev *Event, depth int) bool {
	if g == nil {
		return true
	}
	if depth > 64 {
		return false
	}
	switch g.Kind {
	case config.GuardArgument, config.GuardResult:
		var root gjson.Result
		if ev != nil {
			root = ev.Arguments
			if g.Kind == config.GuardResult {
				root = ev.Result
			}
		}
		return compare(g, lookup(root, g.Path))
	case config.GuardAnd:
		for i := range g.Guards {
			if !pass(&g.Guards[i], ev, depth+1) {
				return false
			}
		}
		return true
	case config.GuardOr:
		for i := range g.Guards {
			if pass(&g.Guards[i], ev, depth+1) {
				return true
			}
		}
		return false
	case config.GuardNot:
		return len(g.Guards) == 1 && !pass(&g.Guards[0], ev, depth+1)
	}
	return false
}

// compare applies g's op to v.
func compare(g *config.Guard, v gjson.Result) bool {
	switch g.Op {
	case config.OpExists:
		return v.Exists()
	case config.OpEq:
		return v.Exists() && g.Value.Equal(v)
	case config.OpNe:
		return !(v.Exists() && g.Value.Equal(v))
	case config.OpIn:
		if !v.Exists() {
			return false
		}
		for i := range g.Values {
			if g.Values[i].Equal(v) {
				return true
			}
		}
		return false
	}
	if v.Type != gjson.Number {
		return false
	}
	n, x := config.ParseNumber(v.Raw), g.Value.Num
	switch g.Op {
	case config.OpLt:
		return n < x
	case config.OpLte:
		return n <= x
	case config.OpGt:
		return n > x
	case config.OpGte:
		return n >= x
	}
	return false
}

// lookup reads path in v: object members by name (the last of a repeated one), array
// items by canonical index.
func lookup(v gjson.Result, path []string) gjson.Result {
	for _, seg := range path {
		switch {
		case v.IsObject():
			var found gjson.Result
			v.ForEach(func(k, val gjson.Result) bool {
				if k.Str == seg {
					found = val
				}
				return true
			})
			v = found
		case v.IsArray():
			idx, ok := index(seg)
			if !ok {
				return gjson.Result{}
			}
			var found gjson.Result
			n := 0
			v.ForEach(func(_, val gjson.Result) bool {
				if n == idx {
					found = val
					return false
				}
				n++
				return true
			})
			v = found
		default:
			return gjson.Result{}
		}
		if !v.Exists() {
			return v
		}
	}
	return v
}

// index reads a canonical array index: 0 or [1-9][0-9]*.
func index(s string) (int, bool) {
	if s == "" || len(s) > 9 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
