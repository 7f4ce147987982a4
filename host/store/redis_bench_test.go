package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stategate/stategate/host/store/storetest"
)

// BenchmarkRedisOps times the store's operations on a real redis-server, one at a time,
// against a bare PING through the same client (the round trip's floor) and through the
// near cache's own connection (nearConn): what a moving call pays (LockLease with load, then
// CompareAndSwapReleasing), what a read pays, and what a warm near read pays. Besides the
// time, which follows the machine's load, each row reports what it costs the server
// (redis-µs/op: INFO commandstats' usec, the commands' own run time) and this process
// (cpu-µs/op: user and system CPU), which follow the code.
func BenchmarkRedisOps(b *testing.B) {
	url := storetest.RedisNear(b)
	ctx := context.Background()
	r, err := NewRedis(ctx, url, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	admin := redis.NewClient(&redis.Options{Addr: r.client.(*redis.Client).Options().Addr})
	defer admin.Close()
	costs := func(b *testing.B) func() {
		if err := admin.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		cpu := processCPU()
		return func() {
			used := processCPU() - cpu
			info, err := admin.Info(ctx, "commandstats").Result()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(serverUsec(info)/float64(b.N), "redis-µs/op")
			b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-µs/op")
		}
	}
	const key = "stategate/v1/flip/session/p/s1"
	if _, err := r.CompareAndSwap(ctx, "s1", key, nil, []byte(`{"s":"a","n":0}`)); err != nil {
		b.Fatal(err)
	}
	b.Run("ping", func(b *testing.B) {
		defer costs(b)()
		for b.Loop() {
			if err := r.client.(*redis.Client).Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ping_near", func(b *testing.B) {
		ping := []nearCmd{{args: []string{"PING"}}}
		defer costs(b)()
		for b.Loop() {
			if _, err := r.near.do(ctx, ping); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get_near_warm", func(b *testing.B) {
		defer costs(b)()
		for b.Loop() {
			if _, err := r.GetNear(ctx, []string{key}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		defer costs(b)()
		for b.Loop() {
			if _, err := r.Get(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("move", func(b *testing.B) {
		vals := [][]byte{[]byte(`{"s":"a","n":0}`), []byte(`{"s":"b","n":1}`)}
		i := 0
		defer costs(b)()
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

// serverUsec sums the usec of INFO commandstats' commands (the INFO and CONFIG calls that
// measure are left out).
func serverUsec(info string) float64 {
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || strings.HasPrefix(name, "cmdstat_info") || strings.HasPrefix(name, "cmdstat_config") {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if k, v, _ := strings.Cut(kv, "="); k == "usec" {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return total
}
