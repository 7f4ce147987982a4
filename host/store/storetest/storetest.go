// Package storetest gives tests a real Redis server to run stores against.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/testenv"
)

// RequireAllEnv, when "1", turns a Redis server that cannot be started from a skip into
// a failure (as `make test` and CI set it). It also lets the helper install redis-server.
const RequireAllEnv = testenv.RequireAllEnv

// Redis starts a redis-server on a free loopback port with scripts/redis.sh, stops it
// when the test ends, and returns its URL (redis://127.0.0.1:PORT/0).
//
// # Notes
//
//   - The script is found from the working directory upwards, next to go.mod.
//   - Without redis-server on PATH the test is skipped, unless STATEGATE_REQUIRE_ALL=1,
//     in which case the script installs it (apt-get) and any failure fails the test.
func Redis(t testing.TB) string {
	t.Helper()
	url, err := startRedis(t)
	if err == nil {
		return url
	}
	testenv.Missing(t, fmt.Errorf("storetest: %w", err))
	return ""
}

// RedisNear is Redis with the store's near cache turned on (near_cache=on; it is off by
// default).
func RedisNear(t testing.TB) string {
	t.Helper()
	if url := Redis(t); url != "" {
		return url + "?near_cache=on"
	}
	return ""
}

func startRedis(t testing.TB) (string, error) {
	if os.Getenv(RequireAllEnv) != "1" {
		if _, err := exec.LookPath("redis-server"); err != nil {
			return "", errors.New("redis-server not installed (scripts/redis.sh install)")
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "scripts", "redis.sh")
	dir := t.TempDir()
	var lastErr error
	for range 3 { // another process may take the free port before redis-server does
		port, err := freePort()
		if err != nil {
			return "", err
		}
		p := strconv.Itoa(port)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, "bash", script, "start", p, dir).CombinedOutput()
		cancel()
		if err != nil {
			lastErr = fmt.Errorf("redis.sh start %s: %w\n%s", p, err, out)
			continue
		}
		t.Cleanup(func() {
			if out, err := exec.Command("bash", script, "stop", p).CombinedOutput(); err != nil {
				t.Errorf("storetest: redis.sh stop %s: %v\n%s", p, err, out)
			}
		})
		return "redis://127.0.0.1:" + p + "/0", nil
	}
	return "", lastErr
}

// moduleRoot walks up from the working directory to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
