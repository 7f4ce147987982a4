package gateway

import "time"

// SetHeldKeepAlive sets how often a held call's stream carries a comment (tests), and
// returns the previous value.
func SetHeldKeepAlive(d time.Duration) time.Duration {
	prev := heldKeepAlive
	heldKeepAlive = d
	return prev
}

// OpenStreams reports how many standing streams (GET SSE) are open over every session:
// tests wait on it for a client's stream to be open before a notification is sent.
func (g *Gateway) OpenStreams() int {
	g.streams.mu.Lock()
	defer g.streams.mu.Unlock()
	n := 0
	for _, chs := range g.streams.m {
		n += len(chs)
	}
	return n
}
