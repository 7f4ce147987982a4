package configfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/stategate/stategate/plugin/jsonx"
	"go.yaml.in/yaml/v3"
)

// Bounds of a YAML document's conversion. Aliases repeat what they point at, so a small
// file can stand for a huge document ("billion laughs"): the conversion stops at MaxNodes
// values or MaxJSONBytes of output, whichever comes first.
const (
	MaxNodes     = 100_000
	MaxJSONBytes = 16 << 20
	MaxDepth     = 256
)

// YAMLToJSON converts one YAML 1.2 document to JSON, keeping the order of mapping keys.
//
// # Notes
//
//   - Plain scalars resolve by the YAML 1.2 core schema: null, Null, NULL, ~ and nothing
//     are null; true/True/TRUE and false/False/FALSE are booleans; [-+]?[0-9]+, 0o[0-7]+
//     and 0x[0-9a-fA-F]+ are integers; decimal fractions and exponents are floats.
//     Everything else is a string: yes, no, on, off, y, n, 1_000, 0777 (the integer 777),
//     1:20. Quoted and block scalars are strings.
//   - Numbers keep their digits: integers are written in decimal (0x1F as 31), floats as
//     JSON writes them (+.5 as 0.5), without a round trip through float64. .inf and .nan
//     have no JSON form and are refused.
//   - Mapping keys are scalars, taken as their text. A key repeated in one mapping is
//     refused (as the gateway refuses repeated members in JSON), and so is the YAML 1.1
//     merge key (<<), which YAML 1.2 does not have.
//   - Tags: !!str, !!int, !!float, !!bool, !!null, !!map and !!seq, checked against the
//     core schema (!!bool yes is refused); any other tag is refused.
//   - Anchors and aliases work; an alias inside the node it names is refused, and the
//     output is bounded (MaxNodes, MaxJSONBytes, MaxDepth).
func YAMLToJSON(src []byte) ([]byte, error) {
	if i := bytes.Index(src, nel); i >= 0 {
		// YAML readers disagree on it (a line break in YAML 1.1, folded into a space in a
		// quoted scalar; text in YAML 1.2 and JSON): refused rather than read one way.
		return nil, fmt.Errorf("line %d: a raw U+0085 (NEL): YAML readers disagree on it; write it as \\u0085 or \\N in a double-quoted string", 1+bytes.Count(src[:i], []byte("\n")))
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty: no YAML document")
		}
		return nil, fmt.Errorf("not valid YAML: %w", unwrapYAML(err))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document (a configuration is one)")
	}
	c := converter{open: map[*yaml.Node]bool{}}
	if err := c.value(&doc, 0); err != nil {
		return nil, err
	}
	return c.out, nil
}

// unwrapYAML drops the library's "yaml: " prefix (the caller says what failed).
func unwrapYAML(err error) error {
	if s, ok := strings.CutPrefix(err.Error(), "yaml: "); ok {
		return errors.New(s)
	}
	return err
}

type converter struct {
	out   []byte
	nodes int
	open  map[*yaml.Node]bool // nodes being converted: an alias to one of them is a cycle
}

// errAt is an error about node n, with its line.
func errAt(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("line %d: %s", n.Line, fmt.Sprintf(format, args...))
}

func (c *converter) value(n *yaml.Node, depth int) error {
	c.nodes++
	if c.nodes > MaxNodes {
		return errAt(n, "the document has over %d values (aliases count each time they are used)", MaxNodes)
	}
	if len(c.out) > MaxJSONBytes {
		return errAt(n, "the document is over %d bytes as JSON (aliases count each time they are used)", MaxJSONBytes)
	}
	if depth > MaxDepth {
		return errAt(n, "nested deeper than %d levels", MaxDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("empty: no YAML document")
		}
		return c.value(n.Content[0], depth)
	case yaml.AliasNode:
		if n.Alias == nil {
			return errAt(n, "alias *%s names no anchor", n.Value)
		}
		if c.open[n.Alias] {
			return errAt(n, "alias *%s is inside the node it names", n.Value)
		}
		return c.value(n.Alias, depth)
	case yaml.MappingNode:
		if err := checkTag(n, "!!map"); err != nil {
			return err
		}
		return c.mapping(n, depth)
	case yaml.SequenceNode:
		if err := checkTag(n, "!!seq"); err != nil {
			return err
		}
		c.open[n] = true
		defer delete(c.open, n)
		c.out = append(c.out, '[')
		for i, item := range n.Content {
			if i > 0 {
				c.out = append(c.out, ',')
			}
			if err := c.value(item, depth+1); err != nil {
				return err
			}
		}
		c.out = append(c.out, ']')
		return nil
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return errAt(n, "unknown YAML node kind %d", n.Kind)
}

func (c *converter) mapping(n *yaml.Node, depth int) error {
	c.open[n] = true
	defer delete(c.open, n)
	seen := make(map[string]int, len(n.Content)/2)
	c.out = append(c.out, '{')
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return errAt(k, "a mapping key must be a scalar (JSON object keys are strings)")
		}
		if k.Tag == "!!merge" {
			return errAt(k, "the merge key << is YAML 1.1 and not read: write the members out")
		}
		if at, dup := seen[k.Value]; dup {
			return errAt(k, "key %q repeated in one mapping (first at line %d)", k.Value, at)
		}
		seen[k.Value] = k.Line
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = appendString(c.out, k.Value)
		c.out = append(c.out, ':')
		if err := c.value(v, depth+1); err != nil {
			return err
		}
	}
	c.out = append(c.out, '}')
	return nil
}

// checkTag refuses a collection with an explicit tag other than want.
func checkTag(n *yaml.Node, want string) error {
	if n.Style&yaml.TaggedStyle != 0 && n.Tag != want {
		return errAt(n, "tag %s is not supported here (want %s or none)", n.Tag, want)
	}
	return nil
}

// The YAML 1.2 core schema's plain scalars (YAML 1.2.2, 10.3.2).
var (
	coreNull  = regexp.MustCompile(`^(?:null|Null|NULL|~|)$`)
	coreTrue  = regexp.MustCompile(`^(?:true|True|TRUE)$`)
	coreFalse = regexp.MustCompile(`^(?:false|False|FALSE)$`)
	coreInt   = regexp.MustCompile(`^[-+]?[0-9]+$`)
	coreOct   = regexp.MustCompile(`^0o[0-7]+$`)
	coreHex   = regexp.MustCompile(`^0x[0-9a-fA-F]+$`)
	coreFloat = regexp.MustCompile(`^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$`)
	coreInf   = regexp.MustCompile(`^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$`)
)

// The kinds a scalar resolves to.
const (
	kindStr = "!!str"
	kindNul = "!!null"
	kindBoo = "!!bool"
	kindInt = "!!int"
	kindFlo = "!!float"
)

// resolve is the core schema's kind of a plain scalar's text.
func resolve(s string) string {
	switch {
	case coreNull.MatchString(s):
		return kindNul
	case coreTrue.MatchString(s), coreFalse.MatchString(s):
		return kindBoo
	case coreInt.MatchString(s), coreOct.MatchString(s), coreHex.MatchString(s):
		return kindInt
	case coreFloat.MatchString(s), coreInf.MatchString(s):
		return kindFlo
	}
	return kindStr
}

func (c *converter) scalar(n *yaml.Node) error {
	quoted := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	kind := kindStr
	switch {
	case n.Style&yaml.TaggedStyle != 0:
		kind = n.Tag
		switch kind {
		case kindStr, kindNul, kindBoo, kindInt, kindFlo:
		default:
			return errAt(n, "tag %s is not supported (YAML 1.2 core schema: !!str, !!int, !!float, !!bool, !!null)", n.Tag)
		}
		if kind != kindStr && resolve(n.Value) != kind && !(kind == kindFlo && coreInt.MatchString(n.Value)) {
			return errAt(n, "%q is not a %s in YAML 1.2", n.Value, kind)
		}
	case !quoted:
		kind = resolve(n.Value)
	}
	switch kind {
	case kindNul:
		c.out = append(c.out, "null"...)
	case kindBoo:
		if coreTrue.MatchString(n.Value) {
			c.out = append(c.out, "true"...)
		} else {
			c.out = append(c.out, "false"...)
		}
	case kindInt:
		c.out = appendInt(c.out, n.Value)
	case kindFlo:
		if coreInf.MatchString(n.Value) {
			return errAt(n, "%s has no JSON form", n.Value)
		}
		c.out = appendFloat(c.out, n.Value)
	default:
		c.out = appendString(c.out, n.Value)
	}
	return nil
}

// appendString writes s as a JSON string whose text is also YAML for the same string:
// what JSON leaves raw but YAML does not read as itself is escaped. That is the line breaks
// of YAML 1.1 (U+0085 NEL, U+2028, U+2029), which a YAML reader may fold into a space, and
// the characters YAML does not allow in a stream at all (DEL, the C1 controls, U+FFFE and
// U+FFFF; and U+FEFF, a byte order mark to some readers), so the output reads back
// unchanged.
func appendString(dst []byte, s string) []byte {
	start := len(dst)
	dst = jsonx.AppendString(dst, s)
	i := start
	for i < len(dst) && !yamlRaw(dst[i:]) {
		i++
	}
	if i == len(dst) {
		return dst
	}
	out := append([]byte(nil), dst[start:i]...)
	for _, r := range string(dst[i:]) {
		if yamlEscaped(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return append(dst[:start], out...)
}

// yamlRaw reports whether b starts with a character appendString escapes (each is 0x7F
// or starts with the lead byte 0xC2 or 0xE2 or 0xEF in UTF-8).
func yamlRaw(b []byte) bool {
	if b[0] != 0x7f && b[0] != 0xc2 && b[0] != 0xe2 && b[0] != 0xef {
		return false
	}
	r, _ := utf8.DecodeRune(b)
	return yamlEscaped(r)
}

// yamlEscaped: the characters appendString writes as \u escapes.
func yamlEscaped(r rune) bool {
	return r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff
}

var nel = []byte("\u0085")

// appendInt writes a core-schema integer in decimal, exactly.
func appendInt(dst []byte, s string) []byte {
	base, digits, neg := 10, s, false
	switch {
	case strings.HasPrefix(s, "0o"):
		base, digits = 8, s[2:]
	case strings.HasPrefix(s, "0x"):
		base, digits = 16, s[2:]
	default:
		if digits[0] == '-' || digits[0] == '+' {
			neg, digits = digits[0] == '-', digits[1:]
		}
	}
	if base == 10 {
		digits = strings.TrimLeft(digits, "0")
		if digits == "" {
			return append(dst, '0') // -0 is 0
		}
		if neg {
			dst = append(dst, '-')
		}
		return append(dst, digits...)
	}
	v, _ := new(big.Int).SetString(digits, base) // the pattern admits only valid digits
	return v.Append(dst, 10)
}

// appendFloat writes a core-schema float as a JSON number with the same digits: no sign
// '+', a 0 before a leading '.', a 0 after a trailing '.', no leading zeros.
func appendFloat(dst []byte, s string) []byte {
	if s[0] == '-' {
		dst = append(dst, '-')
		s = s[1:]
	} else if s[0] == '+' {
		s = s[1:]
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i:]
	}
	whole, frac, dot := strings.Cut(mant, ".")
	if whole = strings.TrimLeft(whole, "0"); whole == "" {
		whole = "0"
	}
	dst = append(dst, whole...)
	if dot {
		if frac == "" {
			frac = "0"
		}
		dst = append(append(dst, '.'), frac...)
	}
	return append(dst, exp...)
}
