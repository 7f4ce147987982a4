package jsonx

import "testing"

func TestAppendStrings(t *testing.T) {
	for _, list := range [][]string{nil, {}, {"a"}, {"a", "b\n", "<&>"}} {
		got := string(AppendStrings([]byte("x"), list))
		want := "x["
		for i, s := range list {
			if i > 0 {
				want += ","
			}
			want += string(AppendString(nil, s))
		}
		if want += "]"; got != want {
			t.Errorf("AppendStrings(%q) = %s, want %s", list, got, want)
		}
	}
}
