package limits

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestFirstOversizedArray(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		limit int
		want  Violation
		count int
	}{
		{
			name:  "nested_in_array_of_objects",
			doc:   `{"orders":[{"lines":[1]},{"lines":[]},{"lines":[1,2]},{"lines":[1,2,3,4,5]}]}`,
			limit: 4,
			want:  Violation{Path: "orders[3].lines", Actual: 5},
			count: 1,
		},
		{
			name:  "top_level_key",
			doc:   `{"name":"x","items":[1,2,3,4]}`,
			limit: 3,
			want:  Violation{Path: "items", Actual: 4},
			count: 1,
		},
		{
			name:  "at_limit_is_fine",
			doc:   `{"items":[1,2,3]}`,
			limit: 3,
			count: 0,
		},
		{
			name:  "key_needing_quotes",
			doc:   `{"a b":[1,2]}`,
			limit: 1,
			want:  Violation{Path: `["a b"]`, Actual: 2},
			count: 1,
		},
		{
			name:  "quoted_key_after_plain_key",
			doc:   `{"x":{"a.b":[1,2]}}`,
			limit: 1,
			want:  Violation{Path: `x["a.b"]`, Actual: 2},
			count: 1,
		},
		{
			name:  "empty_key",
			doc:   `{"":[1,2]}`,
			limit: 1,
			want:  Violation{Path: `[""]`, Actual: 2},
			count: 1,
		},
		{
			name:  "escaped_key",
			doc:   `{"a\"b":[1,2]}`,
			limit: 1,
			want:  Violation{Path: `["a\"b"]`, Actual: 2},
			count: 1,
		},
		{
			name:  "unicode_escaped_plain_key",
			doc:   `{"\u0069tems":[1,2]}`,
			limit: 1,
			want:  Violation{Path: `items`, Actual: 2},
			count: 1,
		},
		{
			name:  "escaped_slash_in_key",
			doc:   `{"a\/b":[1,2]}`,
			limit: 1,
			want:  Violation{Path: `["a/b"]`, Actual: 2},
			count: 1,
		},
		{
			name:  "surrogate_pair_in_key",
			doc:   `{"\ud83d\ude00":[1,2]}`,
			limit: 1,
			want:  Violation{Path: `["😀"]`, Actual: 2},
			count: 1,
		},
		{
			name:  "lone_surrogate_in_key",
			doc:   `{"\ud83d":[1,2]}`,
			limit: 1,
			want:  Violation{Path: `["` + "\ufffd" + `"]`, Actual: 2},
			count: 1,
		},
		{
			name:  "nested_arrays_outer_too",
			doc:   `{"matrix":[[1],[1,2,3],[1]]}`,
			limit: 2,
			want:  Violation{Path: "matrix", Actual: 3}, // the outer array opens first
			count: 2,
		},
		{
			name:  "nested_arrays",
			doc:   `{"matrix":[[1],[1,2,3]]}`,
			limit: 2,
			want:  Violation{Path: "matrix[1]", Actual: 3},
			count: 1,
		},
		{
			name:  "document_is_the_array",
			doc:   `[1,2,3]`,
			limit: 2,
			want:  Violation{Path: "", Actual: 3},
			count: 1,
		},
		{
			name:  "array_in_top_level_array",
			doc:   `[[],[1,2,3]]`,
			limit: 2,
			want:  Violation{Path: "[1]", Actual: 3},
			count: 1,
		},
		{
			name:  "key_under_top_level_array",
			doc:   `[{"a":[1,2]}]`,
			limit: 1,
			want:  Violation{Path: "[0].a", Actual: 2},
			count: 1,
		},
		{
			name:  "strings_with_brackets_commas_quotes",
			doc:   `{"s":["[,]", "{\"a\":[1,2]}", "\\", "\\\"]", ",,,"]}`,
			limit: 4,
			want:  Violation{Path: "s", Actual: 5},
			count: 1,
		},
		{
			name:  "strings_that_look_like_keys",
			doc:   `{"s":["a:", "b", ":" , "c" ]}`,
			limit: 3,
			want:  Violation{Path: "s", Actual: 4},
			count: 1,
		},
		{
			name:  "bracket_in_key",
			doc:   `{"[a]":{"b":[1,2]}}`,
			limit: 1,
			want:  Violation{Path: `["[a]"].b`, Actual: 2},
			count: 1,
		},
		{
			name:  "mixed_elements",
			doc:   `{"v":[1, -2.5e+3, true, false, null, "x", {"k":[1,2,3]}, [], {}]}`,
			limit: 8,
			want:  Violation{Path: "v", Actual: 9},
			count: 1,
		},
		{
			name:  "objects_count_once",
			doc:   `{"v":[{"a":1,"b":2,"c":[1,2]},{"d":{}}]}`,
			limit: 2,
			count: 0,
		},
		{
			name:  "whitespace_everywhere",
			doc:   " { \"v\" :\n[ 1 ,\t2 , 3\r\n] } ",
			limit: 2,
			want:  Violation{Path: "v", Actual: 3},
			count: 1,
		},
		{
			name:  "empty_arrays",
			doc:   `{"a":[],"b":[[],[]]}`,
			limit: 1,
			want:  Violation{Path: "b", Actual: 2},
			count: 1,
		},
		{
			name:  "empty_array_over_negative_limit",
			doc:   `[]`,
			limit: -1,
			want:  Violation{Path: "", Actual: 0},
			count: 1,
		},
		{
			name:  "outermost_first",
			doc:   `{"a":[[1,2,3],[4,5,6],[7]]}`,
			limit: 2,
			want:  Violation{Path: "a", Actual: 3},
			count: 3,
		},
		{
			name:  "first_sibling_wins",
			doc:   `{"a":{"x":[1,2]},"b":[1,2,3,4]}`,
			limit: 1,
			want:  Violation{Path: "a.x", Actual: 2},
			count: 2,
		},
		{
			name:  "earlier_opening_bracket_wins_over_earlier_close",
			doc:   `[[1,2],[3]]`,
			limit: 1,
			want:  Violation{Path: "", Actual: 2},
			count: 2,
		},
		{
			name:  "key_after_nested_value_is_the_current_one",
			doc:   `{"a":{"b":1},"c":[1,2]}`,
			limit: 1,
			want:  Violation{Path: "c", Actual: 2},
			count: 1,
		},
		{
			name:  "scalar_document",
			doc:   `"[1,2,3]"`,
			limit: 0,
			count: 0,
		},
		{
			name:  "number_document",
			doc:   `12`,
			limit: 0,
			count: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.doc)) {
				t.Fatalf("test document is not valid JSON: %s", tc.doc)
			}
			got, count := FirstOversizedArray([]byte(tc.doc), tc.limit)
			if got != tc.want || count != tc.count {
				t.Errorf("FirstOversizedArray = %+v, %d; want %+v, %d", got, count, tc.want, tc.count)
			}
			refV, refCount := reference(t, []byte(tc.doc), tc.limit)
			if refV != tc.want || refCount != tc.count {
				t.Errorf("reference = %+v, %d; the table disagrees with it", refV, refCount)
			}
		})
	}
}

func TestFirstOversizedArray_deep(t *testing.T) {
	// Nesting costs heap, not stack: a very deep document is scanned without trouble.
	const depth = 100000
	doc := strings.Repeat(`{"a":[`, depth) + "1,2" + strings.Repeat("]}", depth)
	v, count := FirstOversizedArray([]byte(doc), 1)
	if count != 1 || v.Actual != 2 || strings.Count(v.Path, "[0]") != depth-1 {
		t.Errorf("got count %d, actual %d, path of %d bytes", count, v.Actual, len(v.Path))
	}
}

func TestFirstOversizedArray_invalidInput(t *testing.T) {
	// The answer is unspecified, but the scan must end without panicking.
	for _, doc := range []string{``, `]`, `}}}`, `[`, `{"a`, `{"a":[1,`, `"\`, `[1,2]]]`, `{"a":}`, `:::`, `[{]`} {
		FirstOversizedArray([]byte(doc), 0)
	}
}

// reference computes FirstOversizedArray by recursive descent over encoding/json's token
// stream, which keeps the keys in document order.
func reference(t testing.TB, data []byte, limit int) (Violation, int) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type found struct {
		path string
		n    int
	}
	var arrays []found // in order of the opening bracket
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('['):
			idx := len(arrays)
			arrays = append(arrays, found{path: path})
			n := 0
			for dec.More() {
				if err := walk(path + "[" + strconv.Itoa(n) + "]"); err != nil {
					return err
				}
				n++
			}
			arrays[idx].n = n
			_, err = dec.Token() // ']'
			return err
		case json.Delim('{'):
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if err := walk(refJoin(path, k.(string))); err != nil {
					return err
				}
			}
			_, err = dec.Token() // '}'
			return err
		}
		return nil
	}
	if err := walk(""); err != nil {
		t.Fatalf("reference: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("reference: trailing data: %v", err)
	}
	var v Violation
	count := 0
	for _, a := range arrays {
		if a.n > limit {
			if count == 0 {
				v = Violation{Path: a.path, Actual: a.n}
			}
			count++
		}
	}
	return v, count
}

func refJoin(path, key string) string {
	plain := key != ""
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			plain = false
		}
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

// TestMayExceed: the comma count rules out what it can and nothing more.
func TestMayExceed(t *testing.T) {
	for _, tt := range []struct {
		data  string
		limit int
		want  bool
	}{
		{`{"a":[1,2,3]}`, 3, false}, {`{"a":[1,2,3,4]}`, 3, true}, {`{"a":"x,y,z,w","b":[1]}`, 3, true},
		{`[1,2]`, 1, true}, {`[]`, 0, true}, {`{"a":[1,2],"b":[3,4]}`, 2, true}, // commas of all arrays count: it may only overestimate
		{`{"a":[1,2]}`, 2, false},
	} {
		if got := MayExceed([]byte(tt.data), tt.limit); got != tt.want {
			t.Errorf("MayExceed(%s, %d) = %v, want %v", tt.data, tt.limit, got, tt.want)
		}
	}
}

func FuzzFirstOversizedArray(f *testing.F) {
	seeds := []string{
		`{"orders":[{"lines":[1]},{"lines":[1,2,3]}]}`,
		`[1,2,3]`, `{"a b":[1,2]}`, `{"matrix":[[1],[1,2,3]]}`,
		`{"s":["[,]", "{\"a\":[1,2]}", "\\", "\\\"]"]}`,
		`{"v":[1, -2.5e+3, true, false, null, "x", {"k":[1,2,3]}, [], {}]}`,
		`{"a\/b":[1,2]}`, `{"\ud83d\ude00":[1,2]}`, `{"\ud83d":[1,2]}`, "{\"\xff\":[1,2]}",
		`"x"`, `[]`, `{}`,
		// past the 16 levels kept in place, and back
		strings.Repeat(`{"k":[`, 10) + `[1,2,3]` + strings.Repeat(`]}`, 10),
		strings.Repeat(`[{"a":`, 9) + `[1,2,[1,2,3]]` + strings.Repeat(`}]`, 9),
		`{"x":[` + strings.Repeat(`[`, 20) + strings.Repeat(`]`, 20) + `,[1,2,3],` + strings.Repeat(`{"y":`, 17) + `[4,5,6]` + strings.Repeat(`}`, 17) + `]}`,
	}
	for _, s := range seeds {
		for _, limit := range []int{0, 1, 2} {
			f.Add([]byte(s), limit)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		v, count := FirstOversizedArray(data, limit) // must not panic on any input
		if !json.Valid(data) {
			return
		}
		refV, refCount := reference(t, data, limit)
		if v != refV || count != refCount {
			t.Fatalf("FirstOversizedArray(%q, %d) = %+v, %d; reference %+v, %d", data, limit, v, count, refV, refCount)
		}
		if count > 0 && !MayExceed(data, limit) {
			t.Fatalf("MayExceed(%q, %d) = false, but %d arrays exceed it", data, limit, count)
		}
	})
}
