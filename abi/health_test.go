package abi_test

import (
	"testing"

	"github.com/stategate/stategate/abi"
)

func TestIsHealthKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"stategate/v1/health-index", true},
		{"stategate/v1/health/tasks.get", true},
		{"stategate/v1/health/github%2Fx", true},
		// A workflow named "health" keeps its keys under the same prefix, with more segments.
		{"stategate/v1/health/session//s1", false},
		{"stategate/v1/health/arg.cart_id//c1", false},
		{"stategate/v1/health/", false},
		{"stategate/v1/checkout/session//s1", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := abi.IsHealthKey(tc.key); got != tc.want {
			t.Errorf("IsHealthKey(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
}
