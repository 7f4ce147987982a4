package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/testenv"
)

// Server is a redis-server (or sentinel) process a test started.
type Server struct {
	Port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Addr is the server's loopback address, HOST:PORT.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Kill ends the server at once (SIGKILL: no shutdown, no goodbye to its replicas), as a
// crash would, and waits until it has exited.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Cluster starts a Redis Cluster of masters masters (no replicas) on loopback, each with
// its own port and cluster bus port, joins them with `redis-cli --cluster create`, waits
// until every node reports cluster_state:ok, and stops them when the test ends. It returns
// the store spec (redis+cluster://HOST:PORT,...) and the masters.
//
// # Notes
//
//   - Missing redis-server or redis-cli goes through testenv.Missing (under
//     STATEGATE_REQUIRE_ALL=1 scripts/redis.sh installs them first).
func Cluster(t testing.TB, masters int) (string, []*Server) {
	t.Helper()
	return cluster(t, masters, 0)
}

// ClusterWithReplicas is Cluster with replicas replicas per master (which node serves as
// what is redis-cli's choice); it waits until every replica is in sync and returns the
// spec.
func ClusterWithReplicas(t testing.TB, masters, replicas int) string {
	t.Helper()
	spec, _ := cluster(t, masters, replicas)
	return spec
}

func cluster(t testing.TB, masters, replicas int) (string, []*Server) {
	t.Helper()
	need(t)
	dir := t.TempDir()
	var nodes []*Server
	var addrs []string
	for i := range masters * (1 + replicas) {
		bus, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s := startServer(t, dir, fmt.Sprintf("node%d", i), func(port int) []string {
			return []string{"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
				"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)),
				"--cluster-node-timeout", "5000"}
		})
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("storetest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		waitFor(t, 20*time.Second, "cluster_state:ok on "+n.Addr(), func() bool {
			return strings.Contains(cli(n.Port, "cluster", "info"), "cluster_state:ok")
		})
		waitFor(t, 20*time.Second, "replication in sync on "+n.Addr(), func() bool {
			info := cli(n.Port, "info", "replication")
			return strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up")
		})
	}
	return "redis+cluster://" + strings.Join(addrs, ","), nodes
}

// SentinelSet is a primary, its replicas and the sentinels watching them, on loopback.
type SentinelSet struct {
	Master    string // the name the sentinels know the primary by
	Primary   *Server
	Replicas  []*Server
	Sentinels []*Server
}

// Spec is the store spec for the set: redis+sentinel://SENTINEL,.../MASTER.
func (s *SentinelSet) Spec() string {
	var addrs []string
	for _, x := range s.Sentinels {
		addrs = append(addrs, x.Addr())
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + s.Master
}

// PrimaryAddr asks the first live sentinel which server is the primary now.
func (s *SentinelSet) PrimaryAddr() string {
	for _, x := range s.Sentinels {
		out := strings.Fields(cli(x.Port, "sentinel", "get-master-addr-by-name", s.Master))
		if len(out) == 2 {
			return out[0] + ":" + out[1]
		}
	}
	return ""
}

// Sentinel starts a primary with replicas replicas and sentinels sentinels (quorum 1,
// down-after 500ms, so a killed primary is replaced within a few seconds), waits until
// every replica is in sync and every sentinel knows them, and stops everything when the
// test ends.
func Sentinel(t testing.TB, replicas, sentinels int) *SentinelSet {
	t.Helper()
	need(t)
	dir := t.TempDir()
	set := &SentinelSet{Master: "stategate"}
	set.Primary = startServer(t, dir, "primary", nil)
	for i := range replicas {
		r := startServer(t, dir, fmt.Sprintf("replica%d", i), func(int) []string {
			return []string{"--replicaof", "127.0.0.1", strconv.Itoa(set.Primary.Port)}
		})
		set.Replicas = append(set.Replicas, r)
		waitFor(t, 20*time.Second, "replica "+r.Addr()+" in sync", func() bool {
			return strings.Contains(cli(r.Port, "info", "replication"), "master_link_status:up")
		})
	}
	for i := range sentinels {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, fmt.Sprintf("sentinel%d.conf", i))
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 1\n"+
			"sentinel down-after-milliseconds %s 500\nsentinel failover-timeout %s 5000\n",
			port, dir, set.Master, set.Primary.Port, set.Master, set.Master)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		s := run(t, dir, fmt.Sprintf("sentinel%d", i), port, conf, "--sentinel")
		set.Sentinels = append(set.Sentinels, s)
		waitFor(t, 20*time.Second, "sentinel "+s.Addr()+" to know every replica", func() bool {
			return strings.Count(cli(s.Port, "sentinel", "replicas", set.Master), "master-link-status\nok") == replicas
		})
	}
	return set
}

// need ends t when redis-server or redis-cli is missing (testenv.Missing), installing
// them first under STATEGATE_REQUIRE_ALL=1.
func need(t testing.TB) {
	t.Helper()
	if testenv.RequireAll() {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "redis.sh"), "install").CombinedOutput(); err != nil {
			t.Fatalf("storetest: redis.sh install: %v\n%s", err, out)
		}
	}
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Missing(t, fmt.Errorf("storetest: %s not installed (scripts/redis.sh install)", bin))
		}
	}
}

// startServer starts a redis-server on a free loopback port with extra arguments (given
// the port), retrying when another process takes the port first.
func startServer(t testing.TB, dir, name string, extra func(port int) []string) *Server {
	t.Helper()
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"--save", "", "--appendonly", "no", "--dir", dir,
			"--dbfilename", name + ".rdb", "--protected-mode", "yes"}
		if extra != nil {
			args = append(args, extra(port)...)
		}
		s, err := tryRun(t, dir, name, port, args...)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatal(lastErr)
	return nil
}

// run starts redis-server with args (a config file first, if any) and fails t when it
// does not answer PING.
func run(t testing.TB, dir, name string, port int, args ...string) *Server {
	t.Helper()
	s, err := tryRun(t, dir, name, port, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tryRun(t testing.TB, dir, name string, port int, args ...string) (*Server, error) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	full := args
	if len(args) == 0 || strings.HasPrefix(args[0], "--") {
		full = append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)
	}
	full = append(full, "--logfile", logPath)
	cmd := exec.Command("redis-server", full...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("storetest: redis-server %s: %w", name, err)
	}
	s := &Server{Port: port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(s.Kill)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-s.done:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("storetest: redis-server %s on port %d exited:\n%s", name, port, tail(log))
		default:
		}
		if cli(port, "ping") == "PONG" {
			return s, nil
		}
	}
	s.Kill()
	log, _ := os.ReadFile(logPath)
	return nil, fmt.Errorf("storetest: redis-server %s on port %d did not answer PING within 10s:\n%s", name, port, tail(log))
}

// cli runs redis-cli against a loopback port and returns its trimmed output ("" on error).
func cli(port int, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// waitFor polls cond until it holds, or fails t after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(errors.New("storetest: timed out waiting for " + what))
		}
	}
}

func tail(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
