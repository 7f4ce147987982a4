//go:build !unix

package store

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
)

// connWatch needs a socket it can peek at; without one (not unix) there is no near cache.
type connWatch struct{}

func (w *connWatch) dial(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
	return nil, errors.New("near cache: unsupported on this platform")
}

func (w *connWatch) caughtUp() bool { return false }

const nearSupported = false

const tunedKeepAlive = false
