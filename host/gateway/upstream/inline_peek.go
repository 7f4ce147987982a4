//go:build linux || darwin

package upstream

import (
	"errors"
	"net"
	"syscall"
)

// stillOpen says a kept connection can carry a request: the server has not closed it and
// has sent nothing since its last answer. It peeks at the socket without blocking (one
// system call).
func stillOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	if err := rc.Control(func(fd uintptr) {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
	}); err != nil {
		return false
	}
	return open
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
