//go:build !tinygo

package exchange

import (
	"context"
	"crypto/rand"
	"time"
)

// The runtime seams between the native core and the core in the TinyGo module
// (runtime_tinygo.go): what needs goroutines or timers natively has a single-threaded
// stand-in there, where the host owns time (RATIONALE.md, "The exchange in the module");
// exchange/internal/deadline bounds contexts, exchange/tasks lets a task's lease lapse.

// randomText is crypto/rand.Text: 26 base32 characters, 128 bits.
func randomText() string { return rand.Text() }

// waitFlight waits up to wait for f, the flight of an identical call, and reports whether
// it ended with a cacheable result (in f.result).
func waitFlight(ctx context.Context, f *flight, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-f.done:
		return f.result != nil
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
