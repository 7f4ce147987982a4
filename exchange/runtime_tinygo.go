//go:build tinygo

package exchange

import "crypto/rand"

// The core in the TinyGo module (-scheduler=none: no goroutines) runs one call at a time,
// and the host owns time. runtime_native.go has the native versions;
// exchange/internal/deadline bounds contexts, exchange/tasks lets a task's lease lapse, a
// cache flight is never joined (exchange/cache/wait_tinygo.go).

const base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// randomText is crypto/rand.Text (not in TinyGo's crypto/rand): 26 base32 characters.
func randomText() string {
	var b [26]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = base32[b[i]%32]
	}
	return string(b[:])
}
