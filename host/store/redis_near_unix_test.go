//go:build unix

package store

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stategate/stategate/host/store/storetest"
)

// TestRedisNear_warmReadsStayWarm: on a quiet server, warm reads of a key nobody writes
// cost no round trip, for longer than rueidis's keep-alive interval (1 s): its PING's
// reply, met in the socket by a read, sent that read to the server about once a second
// (the read-only bench row's "want 0" failed on it). The PING is off (netDialer) and the
// connection's liveness is TCP keep-alive probes instead, which the test checks are on;
// and that nothing was sent on the connection meanwhile (CLIENT LIST: idle since the
// fill), which the keep-alive PING fails every time.
func TestRedisNear_warmReadsStayWarm(t *testing.T) {
	if !tunedKeepAlive {
		t.Skip("rueidis's keep-alive PING stays where TCP keep-alive cannot be tuned per socket")
	}
	url := storetest.RedisNear(t)
	ctx := context.Background()
	r, err := NewRedis(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const key = "stategate/v1/flip/session/p/s1"
	if ok, err := r.CompareAndSwap(ctx, "", key, nil, []byte("v1")); err != nil || !ok {
		t.Fatal(ok, err)
	}
	for range 2 { // the write's dirty mark, then the fill
		if _, err := r.GetNear(ctx, []string{key}); err != nil {
			t.Fatal(err)
		}
	}
	before := r.RoundTrips()
	reads := 0
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); reads++ {
		got, err := r.GetNear(ctx, []string{key})
		if err != nil || string(got[0]) != "v1" {
			t.Fatalf("%q, %v", got, err)
		}
		if reads%64 == 0 {
			time.Sleep(time.Millisecond) // reads spread over the interval, not one burst
		}
	}
	if n := r.RoundTrips() - before; n != 0 {
		t.Errorf("%d round trips for %d warm reads, want 0", n, reads)
	}
	// The server was sent nothing on the tracking connection since the fill, 2.5 s ago
	// (CLIENT LIST's idle: whole seconds since its last command).
	admin := redis.NewClient(mustParse(t, strings.TrimSuffix(url, "?near_cache=on")))
	defer admin.Close()
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name=stategate-near ") {
			found = true
			if idle := field(line, "idle"); idle != "2" && idle != "3" && idle != "4" {
				t.Errorf("the tracking connection was sent a command while quiet: %s", line)
			}
		}
	}
	if !found {
		t.Fatalf("no tracking connection in CLIENT LIST:\n%s", list)
	}
	c := r.near.watch.cur.Load()
	on, err := syscall.GetsockoptInt(c.fd, syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
	if err != nil || on != 1 {
		t.Errorf("SO_KEEPALIVE %d, %v: the tracking connection has no liveness check", on, err)
	}
}

// field returns the value of name in a CLIENT LIST line ("" when absent).
func field(line, name string) string {
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok && k == name {
			return v
		}
	}
	return ""
}
