package approval

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestStrip: the gateway's requestState and its inputResponses key go; the server's own
// answers, and every other member, stay as they were.
func TestStrip(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"name":"t","arguments":{"a":1},"requestState":"sg1.x","inputResponses":{"` + InputKey + `":{"action":"accept"}}}`, `{"name":"t","arguments":{"a":1}}`},
		{`{"name":"t","inputResponses":{"` + InputKey + `":{},"confirm":{"action":"accept"}},"requestState":"sg1.x"}`, `{"name":"t","inputResponses":{"confirm":{"action":"accept"}}}`},
		{`{"requestState":"sg1.x"}`, `{}`},
		{`{"name":"t","inputResponses":7}`, `{"name":"t","inputResponses":7}`},
	} {
		got, ok := Strip(gjson.Parse(c.in))
		if !ok || string(got) != c.want {
			t.Errorf("Strip(%s) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
	if _, ok := Strip(gjson.Parse(`[1]`)); ok {
		t.Error("Strip of an array: ok")
	}
}
