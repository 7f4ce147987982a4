//go:build !tinygo

package tasks

import "time"

// The runtime seams between the native core and the core in the TinyGo module
// (runtime_tinygo.go): a lease's lapse needs a timer natively; in the module, where the
// host owns time, it lapses in the store by its expiry.

// spawn runs f on its own goroutine.
func spawn(f func()) { go f() }

// timersFire: afterFunc's functions run when their time comes.
const timersFire = true

// stopper is a timer that can be stopped.
type stopper interface{ Stop() bool }

// afterFunc is time.AfterFunc.
func afterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }
