package store

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stategate/stategate/host/store/storetest"
)

// BenchmarkRedisOps times the store's operations on a real redis-server, one at a time,
// against a bare PING through the same client (the round trip's floor) and through the
// near cache's rueidis connection: what a moving call pays (LockLease with load, then
// CompareAndSwapReleasing), what a read pays, and what a warm near read pays.
func BenchmarkRedisOps(b *testing.B) {
	url := storetest.RedisNear(b)
	ctx := context.Background()
	r, err := NewRedis(ctx, url, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	const key = "stategate/v1/flip/session/p/s1"
	if _, err := r.CompareAndSwap(ctx, "s1", key, nil, []byte(`{"s":"a","n":0}`)); err != nil {
		b.Fatal(err)
	}
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := r.client.(*redis.Client).Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ping_rueidis", func(b *testing.B) {
		c := r.near.client
		for b.Loop() {
			if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get_near_warm", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.GetNear(ctx, []string{key}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Get(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("move", func(b *testing.B) {
		vals := [][]byte{[]byte(`{"s":"a","n":0}`), []byte(`{"s":"b","n":1}`)}
		i := 0
		for b.Loop() {
			lease, got, err := r.LockLease(ctx, []string{key}, time.Minute, true)
			if err != nil {
				b.Fatal(err)
			}
			ok, err := r.CompareAndSwapReleasing(ctx, "s1", key, got[0], vals[(i+1)%2], lease)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			lease.Release()
			i++
		}
	})
}
