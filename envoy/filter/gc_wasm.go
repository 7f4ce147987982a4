//go:build wasip1 && !tinygo

package filter

import (
	"math"
	"runtime/debug"
)

// setGCHeap applies Settings.GCHeapMiB to the VM's Go runtime (only in the .wasm: a
// native build runs inside another program, proxytest's tests, whose collector is its own).
func setGCHeap(mib int) {
	if mib <= 0 {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		return
	}
	debug.SetMemoryLimit(int64(mib) << 20)
	debug.SetGCPercent(-1)
}
