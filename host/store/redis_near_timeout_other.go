//go:build unix && !linux

package store

import (
	"net"
	"time"
)

// nearUserTimeout is Linux's (redis_near_timeout_linux.go); elsewhere the keep-alive
// PING (nearConn.keepAlive), with its own timeout, finds a dead link (tunedKeepAlive is
// false).
const nearUserTimeout = 0

func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }
