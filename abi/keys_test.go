package abi

import "testing"

func TestIsSessionKey(t *testing.T) {
	for key, want := range map[string]bool{
		"stategate/v1/checkout/session//s1":        true,
		"stategate/v1/cart/arg.cart_id/alice/c-42": false,
		"stategate/v1/cart/arg.session/alice/c-42": false,
		"stategate/v1/w/session/p%2Fq/a%2Fsession": true,
		"garbage": false,
	} {
		if got := IsSessionKey(key); got != want {
			t.Errorf("IsSessionKey(%q) = %v, want %v", key, got, want)
		}
	}
}
