package exchange

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestResultOf: the decorated list's result is found by position under the core's own
// envelope, and by gjson otherwise.
func TestResultOf(t *testing.T) {
	for msg, want := range map[string]string{
		listEnvelope + `{"tools":[{"name":"a"}],"nextCursor":"x"}}`: `{"tools":[{"name":"a"}],"nextCursor":"x"}`,
		listEnvelope + `{}}`:                             `{}`,
		`{"id":0,"jsonrpc":"2.0","result":{"tools":[]}}`: `{"tools":[]}`,
		listEnvelope + `{"tools":[]},"x":1}`:             `{"tools":[]}`,
	} {
		if got := resultOf(gjson.Parse(msg)); got.Raw != want || !got.IsObject() {
			t.Errorf("resultOf(%s) = %s, want %s", msg, got.Raw, want)
		}
	}
}

func TestSessionOwned(t *testing.T) {
	for key, want := range map[string]bool{
		"stategate/v1/checkout/session//s1":        true,
		"stategate/v1/cart/arg.cart_id/alice/c-42": false,
		"stategate/v1/cart/arg.session/alice/c-42": false,
		"stategate/v1/w/session/p%2Fq/a%2Fsession": true,
		"garbage": false,
	} {
		if got := sessionOwned(key); got != want {
			t.Errorf("sessionOwned(%q) = %v, want %v", key, got, want)
		}
	}
}
