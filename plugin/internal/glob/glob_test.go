package glob

import (
	"math/rand"
	"strings"
	"testing"
)

// reference reports whether name matches pattern by plain recursion over the
// split segments (memoised only so that long names stay fast).
func reference(pattern, sep, name string) bool {
	pat, segs := strings.Split(pattern, sep), strings.Split(name, sep)
	memo := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		var r bool
		switch {
		case i == len(pat):
			r = j == len(segs)
		case pat[i] == "**":
			r = match(i+1, j) || (j < len(segs) && match(i, j+1))
		case j == len(segs):
			r = false
		case pat[i] == "*" || pat[i] == segs[j]:
			r = match(i+1, j+1)
		}
		memo[key] = r
		return r
	}
	return match(0, 0)
}

func mustCompile(t testing.TB, pattern, sep string) Pattern {
	t.Helper()
	p, err := Compile(pattern, sep)
	if err != nil {
		t.Fatalf("Compile(%q, %q): %v", pattern, sep, err)
	}
	return p
}

func TestMatch(t *testing.T) {
	longMatch := "a." + strings.Repeat("x.b.y.", 30) + "c"
	manyA := strings.Repeat("a.", 100) + "b"
	tests := []struct {
		name, pattern, sep, input string
		want                      bool
	}{
		{"star one segment", "a.*", ".", "a.b", true},
		{"star empty segment", "a.*", ".", "a.", true},
		{"star not zero segments", "a.*", ".", "a", false},
		{"star not two segments", "a.*", ".", "a.b.c", false},
		{"dstar zero segments", "a.**", ".", "a", true},
		{"dstar many segments", "a.**", ".", "a.b.c.d", true},
		{"dstar in middle zero", "a.**.b", ".", "a.b", true},
		{"dstar in middle many", "a.**.b", ".", "a.x.y.b", true},
		{"dstar alone empty name", "**", ".", "", true},
		{"dstar alone empty segments", "**", ".", "a..b", true},
		{"dstar alone anything", "**", ".", "x.y.z", true},
		{"repeated dstar", "**.**.a", ".", "a", true},
		{"star empty name", "*", ".", "", true},
		{"star not two empty segments", "*", ".", ".", false},
		{"literal match", "tasks.update", ".", "tasks.update", true},
		{"literal mismatch", "tasks.update", ".", "tasks.delete", false},
		{"literal prefix", "tasks", ".", "tasks.update", false},
		{"case sensitive", "Tasks.*", ".", "tasks.update", false},
		{"double underscore sep", "backend__*", "__", "backend__tool.name", true},
		{"double underscore sep two", "backend__*", "__", "backend__a__b", false},
		{"double underscore overlap", "a__*", "__", "a___b", true},
		{"long name matches", "a.**.b.**.c", ".", longMatch, true},
		{"long name no match", "a.**.b.**.d", ".", longMatch, false},
		{"long backtracking", "**.a.a.a.b", ".", manyA, true},
		{"long backtracking no match", "**.a.a.a.c", ".", manyA, false},
		{"long star run", "**.*.*.*.b", ".", manyA, true},
		{"zero pattern", "", ".", "", false},
	}
	if len(longMatch) < 128 || len(manyA) < 128 {
		t.Fatal("long names are too short")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p Pattern // the zero value for ""
			if tc.pattern != "" {
				p = mustCompile(t, tc.pattern, tc.sep)
			}
			if got := p.Match(tc.input); got != tc.want {
				t.Errorf("%q.Match(%q) = %v, want %v", tc.pattern, tc.input, got, tc.want)
			}
		})
	}
}

func TestCompile(t *testing.T) {
	p := mustCompile(t, "a.**.**.*", ".")
	if p.String() != "a.**.**.*" {
		t.Errorf("String() = %q", p.String())
	}
	if p.Literal() {
		t.Error("Literal() = true for a wildcard pattern")
	}
	if !mustCompile(t, "tasks.update", ".").Literal() {
		t.Error("Literal() = false for a literal pattern")
	}
	if (Pattern{}).Literal() {
		t.Error("zero Pattern is Literal")
	}
}

func TestCompile_errors(t *testing.T) {
	tests := []struct{ pattern, sep, want string }{
		{"", ".", "empty pattern"},
		{"a..b", ".", "empty segment at position 1"},
		{".a", ".", "empty segment at position 0"},
		{"a.", ".", "empty segment at position 1"},
		{"a____b", "__", "empty segment at position 1"},
		{"tools.get*", ".", `invalid segment "get*"`},
		{"***", ".", `invalid segment "***"`},
		{"a.*b", ".", `invalid segment "*b"`},
		{"a", "", "empty separator"},
		{"a", "*", `separator "*" contains '*'`},
	}
	for _, tc := range tests {
		_, err := Compile(tc.pattern, tc.sep)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Compile(%q, %q) error = %v, want %q", tc.pattern, tc.sep, err, tc.want)
		}
	}
}

func randomPattern(r *rand.Rand, tokens []string, maxLen int, sep string) string {
	parts := make([]string, 1+r.Intn(maxLen))
	for i := range parts {
		parts[i] = tokens[r.Intn(len(tokens))]
	}
	return strings.Join(parts, sep)
}

func TestMatch_againstReference(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	tokens := []string{"a", "b", "*", "**"}
	segs := []string{"a", "b", "c", ""}
	for _, sep := range []string{".", "__"} {
		for i := 0; i < 5000; i++ {
			pattern := randomPattern(r, tokens, 6, sep)
			p := mustCompile(t, pattern, sep)
			for k := 0; k < 10; k++ {
				var name string
				if k < 7 {
					name = randomPattern(r, segs, 10, sep)
				} else {
					// Up to 128 characters, many segments.
					target := r.Intn(129)
					var b strings.Builder
					for b.Len() < target {
						if b.Len() > 0 {
							b.WriteString(sep)
						}
						b.WriteString(segs[r.Intn(len(segs))])
					}
					name = b.String()
				}
				if got, want := p.Match(name), reference(pattern, sep, name); got != want {
					t.Fatalf("%q.Match(%q) = %v, reference says %v", pattern, name, got, want)
				}
			}
		}
	}
}

// allNames lists every name made by joining 1..maxLen segments drawn from
// segs.
func allNames(segs []string, sep string, maxLen int) []string {
	var out []string
	level := []string{""}
	for n := 1; n <= maxLen; n++ {
		var next []string
		for _, prefix := range level {
			for _, s := range segs {
				if n == 1 {
					next = append(next, s)
				} else {
					next = append(next, prefix+sep+s)
				}
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

func segCount(name, sep string) int { return strings.Count(name, sep) + 1 }

// checkRelations compares Covers, Overlap and Witness with brute force over
// names. Every example returned is checked with Match, so a positive answer
// never depends on the enumeration being complete; the enumeration catches
// missed witnesses and overlaps up to its length bound, and checks that the
// examples are shortest.
func checkRelations(t *testing.T, a, b Pattern, names []string, ma, mb []bool) {
	t.Helper()
	sep := a.sep
	shorter := func(i, j int) bool { return j < 0 || segCount(names[i], sep) < segCount(names[j], sep) }
	briefWitness, briefOverlap := -1, -1
	for i := range names {
		if mb[i] && !ma[i] && shorter(i, briefWitness) {
			briefWitness = i
		}
		if mb[i] && ma[i] && shorter(i, briefOverlap) {
			briefOverlap = i
		}
	}
	w, wok := Witness(a, b)
	if wok && (!b.Match(w) || a.Match(w)) {
		t.Fatalf("Witness(%q, %q) = %q, which is not matched by b alone", a, b, w)
	}
	if briefWitness >= 0 {
		if !wok {
			t.Fatalf("Witness(%q, %q) found none; %q is one", a, b, names[briefWitness])
		}
		if segCount(w, sep) > segCount(names[briefWitness], sep) {
			t.Fatalf("Witness(%q, %q) = %q, but %q is shorter", a, b, w, names[briefWitness])
		}
	}
	if Covers(a, b) == wok {
		t.Fatalf("Covers(%q, %q) disagrees with Witness", a, b)
	}
	o, ook := Overlap(a, b)
	if ook && (!a.Match(o) || !b.Match(o)) {
		t.Fatalf("Overlap(%q, %q) = %q, which is not matched by both", a, b, o)
	}
	if briefOverlap >= 0 {
		if !ook {
			t.Fatalf("Overlap(%q, %q) found none; %q is one", a, b, names[briefOverlap])
		}
		if segCount(o, sep) > segCount(names[briefOverlap], sep) {
			t.Fatalf("Overlap(%q, %q) = %q, but %q is shorter", a, b, o, names[briefOverlap])
		}
	}
}

func TestCovers_againstReference(t *testing.T) {
	// Patterns have at most 4 segments and only the literals "a" and "b".
	// Names are every sequence of up to 7 segments over {"a", "b", "x", ""}:
	// the literals plus two segments that equal no literal. This generous
	// bound is beyond every shortest witness the search returns (each is
	// checked against it below), and positive answers are verified with
	// Match anyway.
	const maxLen = 7
	r := rand.New(rand.NewSource(2))
	names := allNames([]string{"a", "b", "x", ""}, ".", maxLen)
	seen := map[string]bool{}
	var pats []Pattern
	var matches [][]bool
	for _, s := range []string{"**", "*", "a", "a.*", "a.**", "*.**", "**.a", "*.*"} {
		seen[s] = true
		pats = append(pats, mustCompile(t, s, "."))
	}
	for len(pats) < 80 {
		s := randomPattern(r, []string{"a", "b", "*", "**"}, 4, ".")
		if !seen[s] {
			seen[s] = true
			pats = append(pats, mustCompile(t, s, "."))
		}
	}
	for _, p := range pats {
		m := make([]bool, len(names))
		for i, n := range names {
			m[i] = p.Match(n)
		}
		matches = append(matches, m)
	}
	for i, a := range pats {
		for j, b := range pats {
			checkRelations(t, a, b, names, matches[i], matches[j])
			if w, ok := Witness(a, b); ok && segCount(w, ".") > maxLen {
				t.Fatalf("Witness(%q, %q) = %q is longer than the enumeration bound", a, b, w)
			}
		}
	}
}

// TestCovers_overlappingSeparator uses a separator that can overlap itself,
// so that some segment sequences are not names (["b_", "x"] joined by "__" is
// "b___x", which splits as "b", "_x").
func TestCovers_overlappingSeparator(t *testing.T) {
	const sep = "__"
	r := rand.New(rand.NewSource(3))
	segs := []string{"_", "a_", "_a", "a", "x", ""}
	names := allNames(segs, sep, 4)
	var pats []Pattern
	for len(pats) < 60 {
		if p, err := Compile(randomPattern(r, []string{"_", "a_", "_a", "a", "*", "**"}, 3, sep), sep); err == nil {
			pats = append(pats, p)
		}
	}
	pats = append(pats, mustCompile(t, "**__b_", sep), mustCompile(t, "*__*", sep))
	for _, a := range pats {
		for _, b := range pats {
			ma, mb := make([]bool, len(names)), make([]bool, len(names))
			for i, n := range names {
				ma[i], mb[i] = a.Match(n), b.Match(n)
			}
			checkRelations(t, a, b, names, ma, mb)
		}
	}
	w, ok := Witness(mustCompile(t, "**__b_", sep), mustCompile(t, "*__*", sep))
	if !ok || w != "x__x" {
		t.Errorf(`Witness("**__b_", "*__*") = %q, %v; want "x__x"`, w, ok)
	}
}

func TestRelations(t *testing.T) {
	c := func(s string) Pattern { return mustCompile(t, s, ".") }
	coverTests := []struct {
		a, b string
		want bool
	}{
		{"**", "a.*", true},
		{"*.**", "**.x", true}, // every name has at least one segment
		{"a.*", "a.**", false},
		{"tasks.*", "tasks.update", true},
		{"tasks.update", "tasks.*", false},
		{"a.**", "a.**.b", true},
		{"**.b", "a.**.b", true},
		{"*", "**", false},
	}
	for _, tc := range coverTests {
		if got := Covers(c(tc.a), c(tc.b)); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	if w, ok := Witness(c("a.*"), c("a.**")); !ok || (w != "a" && w != "a.x.x") {
		t.Errorf(`Witness("a.*", "a.**") = %q, %v`, w, ok)
	}
	if o, ok := Overlap(c("a.*"), c("*.b")); !ok || o != "a.b" {
		t.Errorf(`Overlap("a.*", "*.b") = %q, %v; want "a.b"`, o, ok)
	}
	if o, ok := Overlap(c("a.b"), c("a.c")); ok {
		t.Errorf(`Overlap("a.b", "a.c") = %q, true`, o)
	}
	if w, ok := Witness(c("x.*"), c("*.*")); !ok || w != "x1.x1" && w != "x1.x" {
		t.Errorf(`Witness("x.*", "*.*") = %q, %v`, w, ok)
	}
	// Different separators, and zero Patterns, never panic.
	d := mustCompile(t, "a", "__")
	if Covers(c("**"), d) {
		t.Error("Covers across separators")
	}
	if _, ok := Overlap(c("a"), d); ok {
		t.Error("Overlap across separators")
	}
	if _, ok := Witness(c("b"), d); ok {
		t.Error("Witness across separators")
	}
	if !Covers(Pattern{}, Pattern{}) {
		t.Error("zero Pattern does not cover itself")
	}
	if _, ok := Overlap(Pattern{}, Pattern{}); ok {
		t.Error("zero Patterns overlap")
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("a.**.b", ".", "a.x.y.b")
	f.Add("backend__*", "__", "backend__tool.name")
	f.Add("**", ".", "")
	f.Add("*.*", ".", "a..b")
	f.Add("a__*", "__", "a___b")
	f.Add("tools.get*", ".", "tools.get")
	f.Fuzz(func(t *testing.T, pattern, sep, name string) {
		p, err := Compile(pattern, sep)
		got := p.Match(name)
		if err != nil {
			if got {
				t.Fatalf("invalid pattern %q matched %q", pattern, name)
			}
			return
		}
		if len(name) <= 256 && len(pattern) <= 64 {
			if want := reference(pattern, sep, name); got != want {
				t.Fatalf("%q.Match(%q) with sep %q = %v, reference says %v", pattern, name, sep, got, want)
			}
		}
		if len(p.segs) <= 8 {
			if !Covers(p, p) {
				t.Fatalf("%q does not cover itself", pattern)
			}
			if o, ok := Overlap(p, p); !ok || !p.Match(o) {
				t.Fatalf("Overlap(%q, %q) = %q, %v", pattern, pattern, o, ok)
			}
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	benches := []struct{ name, pattern, sep, input string }{
		{"wildcard", "backend__**__tasks__*", "__", "backend__v2__projects__tasks__update"},
		{"dotted", "github.*.issues.**", ".", "github.stategate.issues.comments.create"},
		{"literal", "tasks.update", ".", "tasks.update"},
	}
	for _, bc := range benches {
		p := mustCompile(b, bc.pattern, bc.sep)
		if !p.Match(bc.input) {
			b.Fatalf("%q does not match %q", bc.pattern, bc.input)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				p.Match(bc.input)
			}
		})
	}
}
