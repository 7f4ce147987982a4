package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// benchAnswer is the answer of the benchmark's server to every POST.
const benchAnswer = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`

// benchServerEnv makes this test binary, started again, the benchmark's server.
const benchServerEnv = "STATEGATE_INLINE_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) != "" {
		serveBench()
		return
	}
	os.Exit(m.Run())
}

// serveBench answers every request with benchAnswer on a loopback port it prints, until
// stdin closes.
func serveBench() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(1)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(benchAnswer))
	}))
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
}

// BenchmarkInline: one POST and its JSON answer over loopback, one at a time, through
// net/http's Transport (the baseline) and through Inline, to a server in a process of its
// own (as an MCP server is deployed: the wake-ups a transport costs show there) and to one
// in this process.
//
//	go test ./host/gateway/upstream -run '^$' -bench Inline -benchmem
func BenchmarkInline(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	remote, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	local := newCountingServer(&testing.T{}, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(benchAnswer))
	})
	defer local.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"users.get","arguments":{"id":"u1"}}}`
	for _, server := range []struct{ name, url string }{
		{"server_process", strings.TrimSpace(remote)},
		{"server_in_process", local.URL + "/mcp"},
	} {
		for _, row := range []struct {
			name string
			rt   http.RoundTripper
		}{
			{"net_http_transport", &http.Transport{MaxIdleConnsPerHost: 256}},
			{"inline", &Inline{}},
		} {
			b.Run(server.name+"/"+row.name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, server.url, strings.NewReader(body))
					resp, err := row.rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || string(got) != benchAnswer {
						b.Fatalf("%q %v", got, err)
					}
				}
			})
		}
	}
}
