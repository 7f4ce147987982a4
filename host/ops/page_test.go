package ops

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAdmin_page: the status page and its assets are served from the binary, with a
// content security policy that allows nothing from elsewhere.
func TestAdmin_page(t *testing.T) {
	e := newAdminEnv(t, "tok", false)
	_ = httptest.NewRecorder
	for path, want := range map[string]string{"/": "<title>stategate</title>", "/admin/": "status.js", "/admin/static/status.js": "sessionStorage", "/admin/static/status.css": "#events"} {
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: %d %q, body lacks %q or no CSP", path, resp.StatusCode, resp.Header.Get("Content-Type"), want)
		}
	}
}
