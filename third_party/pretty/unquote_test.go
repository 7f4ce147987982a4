package pretty

import (
	"encoding/json"
	"testing"
)

// TestUnquote: stategate's replacement of json.Unmarshal in parsestr decodes every JSON
// string literal as encoding/json does.
func TestUnquote(t *testing.T) {
	for _, s := range []string{`"a"`, `"a\"b"`, `"\\\/\b\f\n\r\t"`, `"\u00e9\u20AC"`, `"\ud83d\ude00x"`, `"\ud83dx"`, `"\u12"`, `"é"`} {
		var want string
		err := json.Unmarshal([]byte(s), &want)
		got := string(unquote([]byte(s)))
		if err == nil && got != want {
			t.Errorf("unquote(%s) = %q, want %q", s, got, want)
		}
	}
}

func FuzzUnquote(f *testing.F) {
	f.Add(`"\ud83d\ude00"`)
	f.Fuzz(func(t *testing.T, s string) {
		var want string
		if json.Unmarshal([]byte(s), &want) != nil || len(s) < 2 || s[0] != '"' {
			unquote([]byte(s)) // must not panic
			return
		}
		if got := string(unquote([]byte(s))); got != want {
			t.Errorf("unquote(%q) = %q, want %q", s, got, want)
		}
	})
}
