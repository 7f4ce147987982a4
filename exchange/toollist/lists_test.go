package toollist

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestResultOf: the decorated list's result is found by position under the core's own
// envelope, and by gjson otherwise.
func TestResultOf(t *testing.T) {
	for msg, want := range map[string]string{
		Envelope + `{"tools":[{"name":"a"}],"nextCursor":"x"}}`: `{"tools":[{"name":"a"}],"nextCursor":"x"}`,
		Envelope + `{}}`: `{}`,
		`{"id":0,"jsonrpc":"2.0","result":{"tools":[]}}`: `{"tools":[]}`,
		Envelope + `{"tools":[]},"x":1}`:                 `{"tools":[]}`,
	} {
		if got := ResultOf(gjson.Parse(msg)); got.Raw != want || !got.IsObject() {
			t.Errorf("ResultOf(%s) = %s, want %s", msg, got.Raw, want)
		}
	}
}
