//go:build !unix

package store

import (
	"context"
	"errors"
	"net"
)

// connWatch needs a socket it can peek at; without one (not unix) there is no near cache.
type connWatch struct{}

func (w *connWatch) dial(context.Context, string, *net.Dialer) (*trackedConn, error) {
	return nil, errors.New("near cache: unsupported on this platform")
}

// trackedConn is never made here (dial fails).
type trackedConn struct{ net.Conn }

func (t *trackedConn) atBoundary()   {}
func (t *trackedConn) settled() bool { return false }

const nearSupported = false

const tunedKeepAlive = false
