package peers_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stategate/stategate/internal/testenv"
)

// TestListCacheRow_answersFromTheCopy: the list cache's row measures what it names: with its
// session's GET stream held, the second tools/list is answered from the gateway's copy (the
// upstream sees one), and it is the list.
func TestListCacheRow_answersFromTheCopy(t *testing.T) {
	wasm := filepath.Join("..", "..", "build", "stategate.wasm")
	testenv.NeedFile(t, wasm, "run `make build`")
	var lists atomic.Int64
	uh := upstreamHandler()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/list"`)) {
				lists.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		uh.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	t.Setenv(upstreamEnv, up.URL+"/mcp")
	t.Setenv(wasmEnv, wasm)
	h, err := childHandler("stategate-decorating-listcache")
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	s, err := open(gw.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.holdStream(t); err != nil {
		t.Fatal(err)
	}
	ref := &reference{tools: map[string]bool{"users.get": true}}
	for i := int64(1); i <= 3; i++ {
		resp, body, err := s.post(listBody(i), false)
		if err != nil {
			t.Fatal(err)
		}
		res, err := result(resp.Header.Get("Content-Type"), body, idBase+i)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.checkList(res, nil); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
	}
	if n := lists.Load(); n != 1 {
		t.Fatalf("the upstream got %d tools/list; want 1 (the others from the copy)", n)
	}
}
