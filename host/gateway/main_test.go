package gateway_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// upstreamChildEnv, when set, makes the test binary serve bigUpstream(10) instead of
// running tests: BenchmarkGatewayPaths' remote rows start it as their upstream, in a
// process of its own as an MCP server would be.
const upstreamChildEnv = "STATEGATE_BENCH_UPSTREAM_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(upstreamChildEnv) == "1" {
		serveUpstreamChild()
		return
	}
	os.Exit(m.Run())
}

// serveUpstreamChild serves bigUpstream(10) on a free loopback port, writes its URL as
// one line on stdout, and serves until stdin closes (the parent's end).
func serveUpstreamChild() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go http.Serve(ln, bigUpstream(10))
	fmt.Printf("http://%s\n", ln.Addr())
	bufio.NewReader(os.Stdin).ReadString('\n') // EOF when the parent ends
}

// upstreamCPUEnv, when set to a CPU list (taskset's), runs the upstream child on those CPUs
// only (under taskset), to see what sharing CPUs with it costs: with the benchmark itself
// kept off them (`taskset -c 0 go test ...` with STATEGATE_PATHS_UPSTREAM_CPU=1), neither
// process runs on the other's CPU.
const upstreamCPUEnv = "STATEGATE_PATHS_UPSTREAM_CPU"

// upstreamChild starts this test binary as an upstream in a process of its own and returns
// its URL (without /mcp); the process ends with b.
func upstreamChild(b *testing.B) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if cpus := os.Getenv(upstreamCPUEnv); cpus != "" {
		taskset, err := exec.LookPath("taskset")
		if err != nil {
			b.Fatalf("%s=%s: %v", upstreamCPUEnv, cpus, err)
		}
		cmd = exec.Command(taskset, "-c", cpus, os.Args[0], "-test.run=^$")
	}
	cmd.Env = append(os.Environ(), upstreamChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		b.Fatalf("upstream child: %q, %v", line, err)
	}
	return strings.TrimSpace(line)
}
