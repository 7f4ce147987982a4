//go:build !unix

package store

import "time"

// processCPU is not measured here (BenchmarkRedisOps' cpu-µs/op reads 0).
func processCPU() time.Duration { return 0 }
