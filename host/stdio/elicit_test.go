package stdio

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/internal/testenv"
	"github.com/tidwall/gjson"
)

// server25 answers a 2025-11-25 session and counts the tools/call requests it gets.
type server25 struct {
	mu    sync.Mutex
	calls int
	saw   bool // a body held the gateway's approval id
}

func (u *server25) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	id := gjson.GetBytes(body, "id").Raw
	u.mu.Lock()
	u.saw = u.saw || strings.Contains(string(body), approval.IDPrefix)
	u.mu.Unlock()
	answer := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":`+result+`}`)
	}
	switch m := gjson.GetBytes(body, "method").Str; {
	case m == "initialize":
		w.Header().Set("Mcp-Session-Id", "up-1")
		answer(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s25","version":"1"}}`)
	case id == "" || m == "":
		w.WriteHeader(http.StatusAccepted)
	case m == "tools/call":
		u.mu.Lock()
		u.calls++
		u.mu.Unlock()
		answer(`{"content":[{"type":"text","text":"deleted"}]}`)
	default:
		answer(`{"tools":[{"name":"notes.delete","inputSchema":{"type":"object"}}]}`)
	}
}

// TestStdio_elicitationApproval: a desktop client on stdio (`stategate stdio`) that
// declared elicitation is asked for its yes as a 2025-11-25 client over HTTP is: the
// gateway's elicitation/create comes on stdout, the client's answer on stdin is consumed
// by the gateway (never the server's), and the call's result follows; a decline runs
// nothing.
func TestStdio_elicitationApproval(t *testing.T) {
	testenv.NeedFile(t, plugin, "run `make build`")
	upstream := &server25{}
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	cfg := filepath.Join(t.TempDir(), "stategate.json")
	config := `{"version":1,"names":{"separator":"."},"approvals":[{"match":"notes.delete","by":"user","message":"Delete?"}]}`
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	inR, stdin := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &syncBuffer{}
	go func() {
		if err := runStdio(cfg, up.URL+"/mcp", inR, outW, stderr); err != nil {
			fmt.Fprintln(stderr, err)
		}
		outW.Close()
	}()
	t.Cleanup(func() { stdin.Close() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stdout ended; stderr:\n%s", stderr.String())
			}
			return l
		case <-time.After(20 * time.Second):
			t.Fatalf("no line on stdout; stderr:\n%s", stderr.String())
		}
		return ""
	}
	send(t, stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	if l := next(); !strings.Contains(l, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %s", l)
	}
	send(t, stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, answer := range []string{`{"action":"accept","content":{"approve":true}}`, `{"action":"decline"}`} {
		send(t, stdin, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"notes.delete","arguments":{"id":"n1"}}}`, 10+i))
		q := next()
		qid := gjson.Get(q, "id")
		if gjson.Get(q, "method").Str != "elicitation/create" || !approval.IsID(qid) || !strings.Contains(q, "Tool: notes.delete") {
			t.Fatalf("call %d: the first line is %s; want the gateway's elicitation/create", i, q)
		}
		send(t, stdin, `{"jsonrpc":"2.0","id":`+qid.Raw+`,"result":`+answer+`}`)
		r := next()
		if gjson.Get(r, "id").Int() != int64(10+i) {
			t.Fatalf("call %d: %s; want its answer", i, r)
		}
		if want := []string{"deleted", "APPROVAL_DECLINED"}[i]; !strings.Contains(r, want) {
			t.Errorf("call %d: %s; want %s", i, r, want)
		}
	}
	upstream.mu.Lock()
	defer upstream.mu.Unlock()
	if upstream.calls != 1 || upstream.saw {
		t.Errorf("the server got %d calls (want 1), saw the gateway's question or answers: %v", upstream.calls, upstream.saw)
	}
}
