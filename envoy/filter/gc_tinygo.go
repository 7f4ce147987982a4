//go:build tinygo

package filter

import (
	"runtime"
	_ "unsafe" // go:linkname
)

// setGCHeap applies Settings.GCHeapMiB to TinyGo's collector, which has no memory limit or
// GC percent: it collects when no free range fits an allocation, and grows the heap
// (doubling linear memory) only when a collection leaves less than a third of it free. With
// a small live set the heap stays at a few MB and a collection runs every few hundred
// calls. Growing the heap at start makes it collect about once per heap of garbage, as
// standard Go's memory limit does (gc_wasm.go).
//
// # Notes
//
//   - The heap is grown with the runtime's own growHeap (linear memory doubles each time)
//     while it stays within mib MiB, so it ends between mib/2 and mib MiB. Allocating and
//     dropping a large block instead grows it too, but the collector was seen keeping such
//     a block alive (a stale word on the stack read as a pointer).
//   - growHeap is TinyGo's internal function (src/runtime/arch_tinygowasm.go, v0.42): a
//     TinyGo upgrade must keep this linkname resolving, or the build fails to link.
//   - The heap never shrinks: it is what the VM keeps. 0 keeps TinyGo's own policy.
func setGCHeap(mib int) {
	var ms runtime.MemStats
	for mib > 0 {
		runtime.ReadMemStats(&ms)
		if 2*ms.HeapSys > uint64(mib)<<20 || !growHeap() {
			return
		}
	}
}

//go:linkname growHeap runtime.growHeap
func growHeap() bool
