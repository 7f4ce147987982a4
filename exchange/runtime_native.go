//go:build !tinygo

package exchange

import "crypto/rand"

// The runtime seams between the native core and the core in the TinyGo module
// (runtime_tinygo.go): what needs goroutines or timers natively has a single-threaded
// stand-in there, where the host owns time (RATIONALE.md, "The exchange in the module");
// exchange/internal/deadline bounds contexts, exchange/tasks lets a task's lease lapse,
// exchange/cache joins a flight.

// randomText is crypto/rand.Text: 26 base32 characters, 128 bits.
func randomText() string { return rand.Text() }
