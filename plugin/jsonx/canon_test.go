package jsonx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/tidwall/gjson"
)

func canon(t *testing.T, in string) string {
	t.Helper()
	out, err := AppendCanonical(nil, gjson.Parse(in))
	if err != nil {
		t.Fatalf("AppendCanonical(%s): %v", in, err)
	}
	return string(out)
}

// TestCanonicalNumbers: number literals are kept exactly as written, never rounded
// through float64 (issue 25, finding 4).
func TestCanonicalNumbers(t *testing.T) {
	for _, n := range []string{
		"0", "-0", "1", "1.0", "1e0", "1E0", "1e+0", "10", "1e1", "100e-1", "4.50",
		"9007199254740992", "9007199254740993", "12345678901234567890", "12345678901234567891",
		"1e400", "-1e400", "5e-324", "1.7976931348623157e308", "0.1", "0.10",
	} {
		if got := canon(t, n); got != n {
			t.Errorf("%s -> %s, want it as written", n, got)
		}
		if got := canon(t, `{"id": `+n+` }`); got != `{"id":`+n+`}` {
			t.Errorf("%s in an object -> %s", n, got)
		}
	}
}

func TestCanonicalDocuments(t *testing.T) {
	for in, want := range map[string]string{
		`{"b":1,"a":2}`: `{"a":2,"b":1}`,
		` { "a" : [ 1 , 2.0 , {"z":null,"y":true} ] } `: `{"a":[1,2.0,{"y":true,"z":null}]}`,
		`"\u0041\/\u00e9\b\f\u001f\u2028"`:              "\"A/\u00e9\\b\\f\\u001f\u2028\"",
		// UTF-16 order: U+1F600 (surrogates D83D DE00) sorts before U+E000, unlike in
		// UTF-8 byte order.
		`{"\ue000":1,"\ud83d\ude00":2}`: "{\"\U0001F600\":2,\"\ue000\":1}",
		`{"\u0061":"\ud83d\ude00"}`:     "{\"a\":\"\U0001F600\"}",
	} {
		if got := canon(t, in); got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":1,"\u0062":2}}`, // repeated members: first or last wins
		`"\ud800"`, `"\udc00"`, `"x\ud800\u0041"`, `"\ud83d\u0041"`, `"\ude00\ud83d"`, // unpaired surrogates
		`{"\ud800":1}`, `["\udbff"]`, "\"\xff\"", "{\"\xc3\":1}", // invalid UTF-8
	} {
		if out, err := AppendCanonical(nil, gjson.Parse(bad)); err == nil {
			t.Errorf("%s: has a canonical form %s; readers disagree on it", bad, out)
		}
	}
}

// TestCanonical_reference is the property test of issue 25's finding 4: over random
// documents, two texts have the same canonical form exactly when a reference reader that
// keeps every distinction JSON text makes (encoding/json with UseNumber: number literals as
// written, strings decoded, objects as maps) reads the same value from both. Texts are
// respelled (member order, whitespace, string escapes) and mutated (a digit, 10 vs 10.0,
// case, null vs absent, array order) at random.
func TestCanonical_reference(t *testing.T) {
	rng := rand.New(rand.NewSource(25))
	rounds := 20000
	if testing.Short() {
		rounds = 2000
	}
	same, differ := 0, 0
	for i := range rounds {
		v := genValue(rng, 0)
		a := spell(rng, v)
		var b string
		if rng.Intn(2) == 0 {
			b = spell(rng, v) // the same value, spelled anew
		} else {
			b = spell(rng, mutate(rng, v))
		}
		ca, errA := AppendCanonical(nil, gjson.Parse(a))
		cb, errB := AppendCanonical(nil, gjson.Parse(b))
		if errA != nil || errB != nil {
			t.Fatalf("round %d: no canonical form: %v %v\n%s\n%s", i, errA, errB, a, b)
		}
		ra, rb := reference(t, a), reference(t, b)
		want := reflect.DeepEqual(ra, rb)
		if got := bytes.Equal(ca, cb); got != want {
			t.Fatalf("round %d: same canonical form %v, reference says same value %v\n a: %s\n b: %s\nca: %s\ncb: %s", i, got, want, a, b, ca, cb)
		}
		if want {
			same++
		} else {
			differ++
		}
		// The canonical form is itself JSON of the same value.
		if !reflect.DeepEqual(reference(t, string(ca)), ra) {
			t.Fatalf("round %d: canonical form %s reads as another value than %s", i, ca, a)
		}
	}
	if same < rounds/4 || differ < rounds/8 {
		t.Fatalf("weak sample: %d equal pairs, %d different", same, differ)
	}
}

// reference reads text as a value keeping number literals (json.Number).
func reference(t *testing.T, text string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("reference cannot read %s: %v", text, err)
	}
	return v
}

// A generated value: nil, bool, num (a literal), string, []any or obj (members in order).
type (
	num       string
	genMember struct {
		k string
		v any
	}
	obj []genMember
)

var (
	numbers = []string{"0", "-0", "1", "10", "10.0", "1e1", "1E1", "-1", "0.5", "5e-1",
		"9007199254740992", "9007199254740993", "12345678901234567890", "12345678901234567891", "1e400", "3.14"}
	runesPool = []rune{'a', 'A', 'b', 'B', ' ', '"', '\\', '/', '\n', '\t', 0x1f, 0x7f, 'é', 'É', 0x2028, 0xe000, 0xfffd, 0x1f600, 0x10ffff}
)

func genString(rng *rand.Rand) string {
	n := rng.Intn(4)
	var b strings.Builder
	for range n {
		b.WriteRune(runesPool[rng.Intn(len(runesPool))])
	}
	return b.String()
}

func genValue(rng *rand.Rand, depth int) any {
	k := rng.Intn(7)
	if depth >= 3 && k >= 5 {
		k = rng.Intn(5)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.Intn(2) == 0
	case 2:
		return num(numbers[rng.Intn(len(numbers))])
	case 3, 4:
		return genString(rng)
	case 5:
		var a []any
		for range rng.Intn(4) {
			a = append(a, genValue(rng, depth+1))
		}
		return a
	}
	var o obj
	seen := map[string]bool{}
	for range rng.Intn(4) {
		name := genString(rng)
		if seen[name] {
			continue
		}
		seen[name] = true
		o = append(o, genMember{name, genValue(rng, depth+1)})
	}
	return o
}

// mutate returns v changed in one random place (possibly into an equal value: the
// reference decides).
func mutate(rng *rand.Rand, v any) any {
	switch x := v.(type) {
	case nil:
		return []any{false, num("0"), "", obj{}}[rng.Intn(4)]
	case bool:
		return !x
	case num:
		s := string(x)
		switch rng.Intn(3) {
		case 0: // another last digit
			if d := s[len(s)-1]; d >= '0' && d <= '9' {
				return num(s[:len(s)-1] + string('0'+(d-'0'+1)%10))
			}
			return num(s + "0")
		case 1: // 10 -> 10.0
			if !strings.ContainsAny(s, ".eE") {
				return num(s + ".0")
			}
		}
		return num(numbers[rng.Intn(len(numbers))])
	case string:
		if s := strings.ToUpper(x); s != x && rng.Intn(2) == 0 {
			return s
		}
		return x + genString(rng) + "x"
	case []any:
		if len(x) == 0 {
			return []any{nil}
		}
		out := append([]any(nil), x...)
		switch i := rng.Intn(len(out)); rng.Intn(3) {
		case 0:
			if len(out) > 1 { // array order
				j := (i + 1) % len(out)
				out[i], out[j] = out[j], out[i]
				return out
			}
			fallthrough
		case 1:
			out[i] = mutate(rng, out[i])
		default:
			out = out[:len(out)-1]
		}
		return out
	case obj:
		out := append(obj(nil), x...)
		if len(out) == 0 {
			return obj{{"k", nil}}
		}
		i := rng.Intn(len(out))
		switch rng.Intn(3) {
		case 0:
			if out[i].v == nil { // null against absent
				return append(out[:i:i], out[i+1:]...)
			}
			out[i].v = nil
		case 1:
			out[i].v = mutate(rng, out[i].v)
		default: // a name in another case, or another name
			n := strings.ToUpper(out[i].k)
			if n == out[i].k {
				n += "z"
			}
			for _, m := range out {
				if m.k == n {
					return out
				}
			}
			out[i].k = n
		}
		return out
	}
	panic(fmt.Sprintf("mutate: %T", v))
}

// spell writes v as JSON text with random whitespace, member order and string escapes.
func spell(rng *rand.Rand, v any) string {
	var b strings.Builder
	spellTo(rng, &b, v)
	return b.String()
}

func ws(rng *rand.Rand, b *strings.Builder) {
	b.WriteString([]string{"", "", " ", "\n\t", "  \r\n"}[rng.Intn(5)])
}

func spellTo(rng *rand.Rand, b *strings.Builder, v any) {
	ws(rng, b)
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case num:
		b.WriteString(string(x))
	case string:
		spellString(rng, b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			spellTo(rng, b, e)
		}
		ws(rng, b)
		b.WriteByte(']')
	case obj:
		order := rng.Perm(len(x))
		if rng.Intn(3) == 0 {
			sort.Ints(order)
		}
		b.WriteByte('{')
		for i, j := range order {
			if i > 0 {
				b.WriteByte(',')
			}
			ws(rng, b)
			spellString(rng, b, x[j].k)
			ws(rng, b)
			b.WriteByte(':')
			spellTo(rng, b, x[j].v)
		}
		ws(rng, b)
		b.WriteByte('}')
	}
	ws(rng, b)
}

// spellString writes s as a JSON string, each character escaped or not at random (\uXXXX,
// upper or lower hex, surrogate pairs beyond the BMP, short escapes).
func spellString(rng *rand.Rand, b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		short := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\n': `\n`, '\t': `\t`, '\b': `\b`, '\f': `\f`, '\r': `\r`}[r]
		must := r < 0x20 || r == '"' || r == '\\'
		switch {
		case short != "" && (must || rng.Intn(2) == 0) && rng.Intn(3) > 0:
			b.WriteString(short)
		case must || rng.Intn(3) == 0:
			hex := "%04x"
			if rng.Intn(2) == 0 {
				hex = "%04X"
			}
			if r >= 0x10000 {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u`+hex+`\u`+hex, hi, lo)
			} else {
				fmt.Fprintf(b, `\u`+hex, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// TestUnquoteExact: decoded as every reader does when it can be; refused where readers
// disagree.
func TestUnquoteExact(t *testing.T) {
	for lit, want := range map[string]string{
		`""`: "", `"abc"`: "abc", `"\u0041\n\/"`: "A\n/", `"\ud83d\ude00"`: "\U0001F600", `"\uD83D\uDE00x"`: "\U0001F600x",
		`"é\u00e9"`: "éé", `"\ufffd"`: "\ufffd",
	} {
		if got, ok := UnquoteExact(lit); !ok || got != want {
			t.Errorf("UnquoteExact(%s) = %q, %v; want %q", lit, got, ok, want)
		}
		if got := Unquote(lit); got != want {
			t.Errorf("Unquote(%s) = %q, want %q as UnquoteExact", lit, got, want)
		}
	}
	for _, lit := range []string{`"\ud800"`, `"\ud800x"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud800\ud800"`, "\"\xff\"", "\"a\xc3\\n\"", `"\ud83d\`, `x`} {
		if got, ok := UnquoteExact(lit); ok {
			t.Errorf("UnquoteExact(%s) = %q, true; readers disagree on it", lit, got)
		}
	}
}

// FuzzCanonical: on any valid JSON, AppendCanonical never panics; a form it gives is JSON
// that the reference reads as the same value, and is its own canonical form.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":[1,10.0,"\u0041"],"a":null}`, `"\ud83d\ude00"`, `"\ud800"`, `9007199254740993`,
		`{"a":1,"\u0061":2}`, `[-0,1e400,{"":{}}]`, "\"\xff\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if Validate([]byte(in), 64) != nil || !json.Valid([]byte(in)) {
			return
		}
		out, err := AppendCanonical(nil, gjson.Parse(in))
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%s -> %s: not JSON", in, out)
		}
		if !reflect.DeepEqual(reference(t, string(out)), reference(t, in)) {
			t.Fatalf("%s -> %s: another value", in, out)
		}
		again, err := AppendCanonical(nil, gjson.Parse(string(out)))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("%s -> %s -> %s (%v): not its own canonical form", in, out, again, err)
		}
	})
}
