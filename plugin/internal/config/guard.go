package config

import (
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// maxGuardDepth bounds how deeply guards nest.
const maxGuardDepth = 16

// guard reads an XState guard object of the fixed vocabulary:
//
//	{"type": "argument"|"result", "params": {"path": "a.b", "op": OP, "value": V}}
//	{"type": "and"|"or", "guards": [G...]}
//	{"type": "not", "guard": G}
//
// It returns nil when the guard has errors (reported).
func (p *parser) guard(path string, v gjson.Result, depth int) *Guard {
	if !v.IsObject() {
		p.errf(path, "must be a guard object {\"type\": ...}")
		return nil
	}
	if depth >= maxGuardDepth {
		p.errf(path, "guards nest at most "+strconv.Itoa(maxGuardDepth)+" deep")
		return nil
	}
	t := v.Get("type")
	name, ok := p.str(path+".type", t)
	if !ok {
		return nil
	}
	g := &Guard{}
	switch name {
	case "argument", "result":
		if !p.object(path, v, "type", "params") {
			return nil
		}
		g.Kind = GuardArgument
		if name == "result" {
			g.Kind = GuardResult
		}
		if !p.guardParams(path+".params", v.Get("params"), g) {
			return nil
		}
	case "and", "or":
		if !p.object(path, v, "type", "guards") {
			return nil
		}
		g.Kind = GuardAnd
		if name == "or" {
			g.Kind = GuardOr
		}
		list := v.Get("guards")
		if !list.IsArray() {
			p.errf(path+".guards", "must be an array of guards")
			return nil
		}
		good := true
		for k, item := range list.Array() {
			sub := p.guard(path+".guards["+strconv.Itoa(k)+"]", item, depth+1)
			if sub == nil {
				good = false
				continue
			}
			g.Guards = append(g.Guards, *sub)
		}
		if !good {
			return nil
		}
	case "not":
		if !p.object(path, v, "type", "guard") {
			return nil
		}
		g.Kind = GuardNot
		inner := v.Get("guard")
		if !inner.Exists() {
			p.errf(path+".guard", "required")
			return nil
		}
		sub := p.guard(path+".guard", inner, depth+1)
		if sub == nil {
			return nil
		}
		g.Guards = []Guard{*sub}
	default:
		p.errf(path+".type", "unknown guard type %s: one of argument, result, and, or, not", strconv.Quote(name))
		return nil
	}
	return g
}

// guardParams reads {"path", "op", "value"} into g.
func (p *parser) guardParams(path string, v gjson.Result, g *Guard) bool {
	if !v.Exists() {
		p.errf(path, "required")
		return false
	}
	if !p.object(path, v, "path", "op", "value") {
		return false
	}
	ok := true
	if s, good := p.str(path+".path", v.Get("path")); good {
		g.Path = strings.Split(s, ".")
		for _, seg := range g.Path {
			if seg == "" {
				p.errf(path+".path", "must be member names joined by '.', got %s", strconv.Quote(s))
				ok = false
				break
			}
		}
	} else {
		ok = false
	}
	op, good := p.str(path+".op", v.Get("op"))
	if !good {
		return false
	}
	for i, n := range opNames {
		if n != "" && n == op {
			g.Op = Op(i)
		}
	}
	if g.Op == 0 {
		p.errf(path+".op", "unknown op %s: one of eq, ne, lt, lte, gt, gte, in, exists", strconv.Quote(op))
		return false
	}
	val := v.Get("value")
	switch g.Op {
	case OpExists:
		if val.Exists() {
			p.errf(path+".value", "exists takes no value")
			return false
		}
	case OpIn:
		if !val.IsArray() {
			p.errf(path+".value", "in takes an array of strings, numbers, booleans or null")
			return false
		}
		for k, item := range val.Array() {
			s, good := scalar(item)
			if !good {
				p.errf(path+".value["+strconv.Itoa(k)+"]", "must be a string, number, boolean or null")
				ok = false
			}
			g.Values = append(g.Values, s)
		}
	case OpLt, OpLte, OpGt, OpGte:
		if val.Type != gjson.Number {
			p.errf(path+".value", "%s compares numbers: the value must be a number", op)
			return false
		}
		g.Value, _ = scalar(val)
	default:
		s, good := scalar(val)
		if !good {
			p.errf(path+".value", "%s takes a string, number, boolean or null", op)
			return false
		}
		g.Value = s
	}
	return ok
}

func scalar(v gjson.Result) (Scalar, bool) {
	switch v.Type {
	case gjson.String, gjson.Number, gjson.True, gjson.False, gjson.Null:
		if !v.Exists() {
			return Scalar{}, false
		}
		s := Scalar{Type: v.Type, Str: v.Str, Raw: v.Raw}
		if v.Type == gjson.Number {
			s.Num = parseNumber(v.Raw)
		}
		return s, true
	}
	return Scalar{}, false
}

// parseNumber reads a JSON number as JavaScript does: out of range is +-Infinity or 0.
func parseNumber(raw string) float64 {
	f, _ := strconv.ParseFloat(raw, 64)
	return f
}

// ParseNumber reads a JSON number as JavaScript does.
func ParseNumber(raw string) float64 { return parseNumber(raw) }

// Never reports whether g can never pass, where that is decidable from g alone.
func (g *Guard) Never() bool {
	switch g.Kind {
	case GuardArgument, GuardResult:
		return g.Op == OpIn && len(g.Values) == 0
	case GuardAnd:
		for i := range g.Guards {
			if g.Guards[i].Never() {
				return true
			}
		}
		return contradictory(g.Guards)
	case GuardOr:
		for i := range g.Guards {
			if !g.Guards[i].Never() {
				return false
			}
		}
		return true
	case GuardNot:
		return len(g.Guards) == 1 && g.Guards[0].Always()
	}
	return false
}

// contradictory reports whether the comparisons among gs (all of which must pass) that
// read one value can never pass together: an empty numeric range (amount > 100 and amount
// < 50), two different eq values, or eq a non-number beside an order comparison.
func contradictory(gs []Guard) bool {
	for i := range gs {
		a := &gs[i]
		if a.Kind != GuardArgument && a.Kind != GuardResult {
			continue
		}
		lo, hi := math.Inf(-1), math.Inf(1)
		loOpen, hiOpen, ordered := false, false, false
		var eq *Scalar
		for j := i; j < len(gs); j++ {
			b := &gs[j]
			if b.Kind != a.Kind || !samePath(a.Path, b.Path) {
				continue
			}
			v := b.Value.Num
			switch b.Op {
			case OpLt, OpLte:
				ordered = true
				if v < hi || v == hi && b.Op == OpLt {
					hi, hiOpen = v, b.Op == OpLt
				}
			case OpGt, OpGte:
				ordered = true
				if v > lo || v == lo && b.Op == OpGt {
					lo, loOpen = v, b.Op == OpGt
				}
			case OpEq:
				if eq != nil && !sameScalar(eq, &b.Value) {
					return true
				}
				eq = &b.Value
			}
		}
		if eq != nil {
			if eq.Type != gjson.Number {
				if ordered {
					return true
				}
				continue
			}
			if eq.Num < lo || eq.Num == lo && loOpen || eq.Num > hi || eq.Num == hi && hiOpen {
				return true
			}
		}
		if lo > hi || lo == hi && (loOpen || hiOpen) {
			return true
		}
	}
	return false
}

func samePath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameScalar(a, b *Scalar) bool {
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case gjson.String:
		return a.Str == b.Str
	case gjson.Number:
		return a.Num == b.Num
	}
	return true
}

// Always reports whether g always passes, where that is decidable from g alone.
func (g *Guard) Always() bool {
	switch g.Kind {
	case GuardAnd:
		for i := range g.Guards {
			if !g.Guards[i].Always() {
				return false
			}
		}
		return true
	case GuardOr:
		for i := range g.Guards {
			if g.Guards[i].Always() {
				return true
			}
		}
		return false
	case GuardNot:
		return len(g.Guards) == 1 && g.Guards[0].Never()
	}
	return false
}

// AppendText appends g for people: "amount <= 100", "result status = \"ok\"",
// "(a or b)", "not (c)".
func (g *Guard) AppendText(dst []byte) []byte {
	switch g.Kind {
	case GuardArgument, GuardResult:
		if g.Kind == GuardResult {
			dst = append(dst, "result "...)
		}
		dst = append(dst, strings.Join(g.Path, ".")...)
		switch g.Op {
		case OpExists:
			return append(dst, " is given"...)
		case OpIn:
			dst = append(dst, " in ["...)
			for i := range g.Values {
				if i > 0 {
					dst = append(dst, ", "...)
				}
				dst = append(dst, g.Values[i].Raw...)
			}
			return append(dst, ']')
		}
		dst = append(dst, ' ')
		dst = append(dst, g.Op.Symbol()...)
		dst = append(dst, ' ')
		return append(dst, g.Value.Raw...)
	case GuardNot:
		dst = append(dst, "not ("...)
		if len(g.Guards) == 1 {
			dst = g.Guards[0].AppendText(dst)
		}
		return append(dst, ')')
	}
	if len(g.Guards) == 0 {
		if g.Kind == GuardAnd {
			return append(dst, "always"...)
		}
		return append(dst, "never"...)
	}
	sep := " and "
	if g.Kind == GuardOr {
		sep = " or "
	}
	for i := range g.Guards {
		if i > 0 {
			dst = append(dst, sep...)
		}
		sub := &g.Guards[i]
		paren := sub.Kind == GuardAnd || sub.Kind == GuardOr
		if paren {
			dst = append(dst, '(')
		}
		dst = sub.AppendText(dst)
		if paren {
			dst = append(dst, ')')
		}
	}
	return dst
}
