//go:build !wasip1

package filter

// setGCHeap is a no-op outside the .wasm (see gc_wasm.go).
func setGCHeap(int) {}
