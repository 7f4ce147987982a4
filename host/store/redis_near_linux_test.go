package store

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stategate/stategate/host/store/storetest"
)

// The tracking connection closes when sent data stays unacknowledged past
// nearUserTimeout: keep-alive probes are not sent while a read is in flight, and without it
// a link that silently dropped packets then was found only when retransmissions gave up
// (about 15 minutes), with warm keys served from the cache meanwhile. (By hand, with
// redis-server behind a veth link cut in a network namespace while a miss was in flight:
// the last stale read 12 s after another replica's acknowledged write before, 3.8 s with
// it; a longer partition would have gone on to ~15 minutes.)
func TestRedisNear_userTimeout(t *testing.T) {
	url := storetest.RedisNear(t)
	ctx := context.Background()
	r, err := NewRedis(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.GetNear(ctx, []string{"stategate/v1/flip/session/p/s1"}); err != nil {
		t.Fatal(err)
	}
	c := r.near.watch.cur.Load()
	if c == nil {
		t.Fatal("no tracking connection after a near read")
	}
	got, err := unix.GetsockoptInt(c.fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	if err != nil || got != int(nearUserTimeout.Milliseconds()) {
		t.Errorf("TCP_USER_TIMEOUT %d ms, %v; want %d ms", got, err, nearUserTimeout.Milliseconds())
	}
}
