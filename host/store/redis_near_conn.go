//go:build unix

package store

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
)

// trackedConn is the near cache's TCP connection, read by rueidis's read loop through Read,
// which tells caughtUp whether everything the server has delivered so far has been applied.
//
// # Notes
//
//   - Read runs the read syscall itself (through the socket's RawConn), under mu, and
//     marks the connection idle when the socket had nothing: rueidis reads only once it
//     has applied every whole message it holds, so an idle reader has applied all it got
//     (but a message split across TCP segments, whose rest has not arrived).
//   - caughtUp, under mu, requires an idle reader and a socket with nothing to read
//     (MSG_PEEK|MSG_DONTWAIT): no message, and no end of stream (a killed connection's FIN
//     comes before the killer's OK and before any write that follows it).
//   - Close marks the connection closed under mu before closing it, so the file
//     descriptor caughtUp peeks at is never another file's.
type trackedConn struct {
	*net.TCPConn
	raw syscall.RawConn
	fd  int

	mu     sync.Mutex
	idle   bool
	closed bool
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
			t.idle = true // everything before it applied: wait for more
			return false
		}
		t.idle = false
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

func (t *trackedConn) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	return t.TCPConn.Close()
}

// caughtUp reports whether the read loop has applied everything the server delivered on
// this connection, and the connection is open.
func (t *trackedConn) caughtUp() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || !t.idle || t.fd < 0 {
		return false
	}
	var b [1]byte
	_, _, err := syscall.Recvfrom(t.fd, b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return errors.Is(err, syscall.EAGAIN) // n > 0: a message; n == 0: end of stream
}

// connWatch keeps the near cache's newest connection for caughtUp.
type connWatch struct{ cur atomic.Pointer[trackedConn] }

// dial is rueidis's DialCtxFn: a plain TCP connection, tracked.
func (w *connWatch) dial(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, errors.New("near cache: not a TCP connection")
	}
	t, err := newTrackedConn(tc)
	if err != nil {
		c.Close()
		return nil, err
	}
	w.cur.Store(t)
	return t, nil
}

// caughtUp reports whether the newest connection has applied all it was sent. A reader
// that has just handed over a reply is given a few yields to get back to its socket.
func (w *connWatch) caughtUp() bool {
	t := w.cur.Load()
	if t == nil {
		return false
	}
	for range 4 {
		if t.caughtUp() {
			return true
		}
		t.mu.Lock()
		busy := !t.closed && !t.idle
		t.mu.Unlock()
		if !busy {
			return false // something to read, or closed: not a matter of time
		}
		runtime.Gosched()
	}
	return false
}

const nearSupported = true
