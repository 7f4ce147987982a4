package answer

import "testing"

func TestWithListChanged(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":1,"result":{"capabilities":{"tools":{}}}}`:                    `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`,
		`{"id":1,"result":{"capabilities":{"tools":{"listChanged":false}}}}`: `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`,
		`{"id":1,"result":{"capabilities":{}}}`:                              `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`,
		`{"id":1,"result":{"x":1}}`:                                          `{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}},"x":1}}`,
	} {
		out, ok := WithListChanged([]byte(in))
		if !ok || string(out) != want {
			t.Errorf("WithListChanged(%s) = %s %v; want %s", in, out, ok, want)
		}
	}
	if _, ok := WithListChanged([]byte(`{"id":1,"result":{"capabilities":{"tools":{"listChanged":true}}}}`)); ok {
		t.Error("changed an answer that already declares listChanged")
	}
}
