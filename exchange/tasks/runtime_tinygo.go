//go:build tinygo

package tasks

import "time"

// The core in the TinyGo module (-scheduler=none: no goroutines) runs one call at a time,
// and the host owns time: a lease lapses by the expiry stored with it. runtime_native.go
// has the native versions.

// spawn runs f now.
func spawn(f func()) { f() }

// timersFire: afterFunc's functions never run (afterFunc never fires).
const timersFire = false

// stopper is a timer that can be stopped.
type stopper interface{ Stop() bool }

type never struct{}

func (never) Stop() bool { return true }

// afterFunc never fires: a task's lease lapses in the store by its expiry.
func afterFunc(time.Duration, func()) stopper { return never{} }
