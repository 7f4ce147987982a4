//go:build !(linux || darwin)

package upstream

import "net"

// stillOpen cannot peek here: a kept connection is taken as open (a request that finds it
// closed before sending a byte is sent again on a new one).
func stillOpen(net.Conn) bool { return true }

func isReset(error) bool { return false }
