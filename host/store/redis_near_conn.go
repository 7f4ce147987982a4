//go:build unix

package store

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// trackedConn is the near cache's TCP connection, read by its read loop (nearConn.loop)
// through Read, which tells caughtUp whether everything the server has delivered so far
// has been applied.
//
// # Notes
//
//   - Read runs the read syscall itself (through the socket's RawConn), under mu. The loop
//     marks a message boundary (atBoundary) once it has applied every whole message it
//     read and holds no byte of the next; a Read that returns data clears it, under the
//     same lock. So at a boundary everything taken from the socket has been applied, a
//     message split across TCP segments included.
//   - caughtUp, under mu, requires a boundary and a socket with nothing to read
//     (MSG_PEEK|MSG_DONTWAIT): no message, and no end of stream (a killed connection's FIN
//     comes before the killer's OK and before any write that follows it).
//   - Close marks the connection closed under mu before closing it, so the file
//     descriptor caughtUp peeks at is never another file's.
type trackedConn struct {
	*net.TCPConn
	raw syscall.RawConn
	fd  int

	mu       sync.Mutex
	boundary bool
	closed   bool
}

func newTrackedConn(c *net.TCPConn) (*trackedConn, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	t := &trackedConn{TCPConn: c, raw: raw, fd: -1}
	if err := raw.Control(func(fd uintptr) { t.fd = int(fd) }); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *trackedConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var rerr error
	err := t.raw.Read(func(fd uintptr) bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		n, rerr = syscall.Read(int(fd), b)
		if errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EINTR) {
			return false // wait for more
		}
		if n > 0 {
			t.boundary = false // the loop has bytes to apply
		}
		return true
	})
	switch {
	case err != nil: // a deadline, or the connection closed
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n <= 0:
		return 0, io.EOF
	}
	return n, nil
}

// atBoundary is the read loop's mark: every whole message read has been applied, and no
// byte of the next is held (until a Read returns data).
func (t *trackedConn) atBoundary() {
	t.mu.Lock()
	t.boundary = true
	t.mu.Unlock()
}

func (t *trackedConn) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	return t.TCPConn.Close()
}

// caughtUp reports whether the read loop has applied everything the server delivered on
// this connection, and the connection is open; when it has not, pending reports whether
// that is a matter of time: the connection is open and the reader is at work or has
// input waiting for it (not an end of stream, not an error).
func (t *trackedConn) caughtUp() (ok, pending bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.fd < 0 {
		return false, false
	}
	if !t.boundary {
		return false, true // the loop holds bytes it has not applied yet
	}
	var b [1]byte
	n, _, err := syscall.Recvfrom(t.fd, b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return true, false
	case err == nil && n > 0:
		return false, true // a message the reader has not been woken for yet
	}
	return false, false // n == 0: end of stream; or an error
}

// keepAliveConfig finds a dead server or link under the tracking connection in about four
// seconds (where it is set, the keep-alive PING it replaces is off: see nearConn.keepAlive). The
// probes carry no data, so they never show in caughtUp's peek. The kernel sends no probe
// while sent data is unacknowledged, so nearUserTimeout covers that case.
var keepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 3}

// tunedKeepAlive: keepAliveConfig can be set per socket (Linux; OpenBSD, for one, has no
// per-socket keep-alive timing, and other systems keep the keep-alive PING).
const tunedKeepAlive = runtime.GOOS == "linux"

// connWatch keeps the near cache's newest connection for caughtUp.
type connWatch struct{ cur atomic.Pointer[trackedConn] }

// dial opens a plain TCP connection to addr, tracked, as the newest connection.
func (w *connWatch) dial(ctx context.Context, addr string, d *net.Dialer) (*trackedConn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, errors.New("near cache: not a TCP connection")
	}
	if tunedKeepAlive {
		if err := tc.SetKeepAliveConfig(keepAliveConfig); err != nil {
			c.Close()
			return nil, err
		}
		if err := setUserTimeout(tc, nearUserTimeout); err != nil {
			c.Close()
			return nil, err
		}
	}
	t, err := newTrackedConn(tc)
	if err != nil {
		c.Close()
		return nil, err
	}
	w.cur.Store(t)
	return t, nil
}

// caughtUpWait bounds how long caughtUp yields to a reader with input pending: about a
// round trip, which is what giving up costs.
const caughtUpWait = 30 * time.Microsecond

// settled reports whether the connection has applied all it was sent. A reader that is at
// work, or has input it has not been woken for yet, is given up to caughtUpWait of yields
// to apply it and get back to its socket.
//
// # Notes
//
//   - Where the keep-alive PING runs (tunedKeepAlive false), its reply is, on a warm quiet
//     connection, the only thing the server sends, and giving up at once cost a warm read
//     a round trip about once a second whenever the read met the reply in the socket (the
//     read-only bench row's "want 0" failed on it). Its reply cannot be told from an
//     invalidation without reading it, so it is waited for, not skipped: once the reader
//     has applied it and the socket is empty, everything delivered before has been applied.
func (t *trackedConn) settled() bool {
	var start time.Time
	for i := 0; ; i++ {
		ok, pending := t.caughtUp()
		switch {
		case ok:
			return true
		case !pending:
			return false // closed, or an end of stream: not a matter of time
		case i == 0:
			start = time.Now()
		case time.Since(start) > caughtUpWait:
			return false
		}
		runtime.Gosched()
	}
}

const nearSupported = true
