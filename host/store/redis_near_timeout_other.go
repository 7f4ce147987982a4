//go:build unix && !linux

package store

import (
	"net"
	"time"
)

// nearUserTimeout is Linux's (redis_near_timeout_linux.go); elsewhere rueidis's keep-alive
// PING, with its own timeout, finds a dead link (tunedKeepAlive is false).
const nearUserTimeout = 0

func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }
