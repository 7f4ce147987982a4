package store

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// nearUserTimeout bounds how long data sent on the tracking connection may stay
// unacknowledged before the kernel closes it (TCP_USER_TIMEOUT). Keep-alive probes are not
// sent while data is in flight, so without it a link that drops packets silently while a
// read is outstanding was found only when retransmissions gave up (tcp_retries2: about 15
// minutes), and the cache served warm keys all that time; with it, about as soon as the
// keep-alive finds an idle link dead.
const nearUserTimeout = 4 * time.Second

// setUserTimeout sets TCP_USER_TIMEOUT on tc.
func setUserTimeout(tc *net.TCPConn, d time.Duration) error {
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}
