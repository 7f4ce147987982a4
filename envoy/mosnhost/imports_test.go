//go:build cgo

package mosnhost

import (
	"testing"

	v1 "mosn.io/proxy-wasm-go-host/proxywasm/v1"
)

// TestSharedData holds the host's shared data to Envoy's rules, which the filter's
// compare-and-set relies on (envoy/filter/store.go).
func TestSharedData(t *testing.T) {
	s := sharedData{m: map[string]*sharedItem{}}
	if _, _, res := s.get("k"); res != v1.WasmResultNotFound {
		t.Fatalf("absent key: %v", res)
	}
	if res := s.set("k", "a", 0xfffffffe); res != v1.WasmResultOk { // created whatever the cas
		t.Fatalf("create: %v", res)
	}
	v, cas, _ := s.get("k")
	if v != "a" || cas != 1 {
		t.Fatalf("got %q cas %d, want \"a\" cas 1 (the counter starts at 1)", v, cas)
	}
	if res := s.set("k", "b", 0xfffffffe); res != v1.WasmResultCasMismatch {
		t.Errorf("create over a present key: %v, want CasMismatch", res)
	}
	if res := s.set("k", "b", cas); res != v1.WasmResultOk {
		t.Errorf("write with the cas read: %v", res)
	}
	if res := s.set("k", "c", cas); res != v1.WasmResultCasMismatch {
		t.Errorf("write with a stale cas: %v, want CasMismatch", res)
	}
	if res := s.set("k", "", 0); res != v1.WasmResultOk {
		t.Errorf("cas 0 (unconditional): %v", res)
	}
	if v, cas, _ := s.get("k"); v != "" || cas != 3 {
		t.Errorf("got %q cas %d, want \"\" cas 3", v, cas)
	}
}
