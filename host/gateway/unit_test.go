package gateway

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestIsResponseTo(t *testing.T) {
	tests := []struct {
		name, msg, id string
		want          bool
	}{
		{"same number", `{"id":1,"result":{}}`, `1`, true},
		{"number spelled differently", `{"id":1.0,"result":{}}`, `1`, true},
		{"string escaped differently", `{"id":"\u0061","result":{}}`, `"a"`, true},
		{"number vs string", `{"id":"1","result":{}}`, `1`, false},
		{"other id", `{"id":2,"result":{}}`, `1`, false},
		{"a request with the same id is not a response", `{"id":1,"method":"sampling/createMessage"}`, `1`, false},
		{"a notification", `{"method":"notifications/progress"}`, `1`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isResponseTo([]byte(tt.msg), gjson.Parse(tt.id)); got != tt.want {
				t.Errorf("isResponseTo(%s, %s) = %v", tt.msg, tt.id, got)
			}
		})
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

func TestHasDuplicateKeys(t *testing.T) {
	many := `{`
	for i := 0; i < 5000; i++ {
		if i > 0 {
			many += ","
		}
		many += `"k` + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)) + `":1`
	}
	for doc, want := range map[string]bool{
		`{"a":1,"b":{"c":[{"d":1,"d":2}]}}`: true,
		`{"a":1,"b":{"c":[{"d":1,"e":2}]}}`: false,
		many + `}`:                          false,
		many + `,"kaaa":2}`:                 true,
	} {
		if got := hasDuplicateKeys(gjson.Parse(doc), 0); got != want {
			t.Errorf("hasDuplicateKeys(%.60s...) = %v, want %v", doc, got, want)
		}
	}
}
