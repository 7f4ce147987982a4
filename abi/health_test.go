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

// TestApprovalKeys_areNoWorkflowKeys: the approval key, the used-state keys and the held
// calls' records, decisions and index can never be taken for a workflow's snapshot
// (leased, moved) or a health record, whatever the nonce or id.
func TestApprovalKeys_areNoWorkflowKeys(t *testing.T) {
	for _, key := range []string{abi.ApprovalSecretKey, abi.ApprovalUsedPrefix + "29616000/00112233445566778899aabbccddeeff", abi.ApprovalKeyPrefix,
		abi.ApprovalPendingPrefix + "0123456789abcdef01234567", abi.ApprovalDecisionPrefix + "0123456789abcdef01234567", abi.ApprovalIndexKey} {
		if abi.IsWorkflowKey(key) || abi.IsHealthKey(key) {
			t.Errorf("%q reads as a workflow or health key", key)
		}
	}
	if len(abi.ApprovalKeyPrefix) >= len(abi.StateKeyPrefix) && abi.ApprovalKeyPrefix[:len(abi.StateKeyPrefix)] == abi.StateKeyPrefix {
		t.Errorf("ApprovalKeyPrefix %q is under StateKeyPrefix", abi.ApprovalKeyPrefix)
	}
}
