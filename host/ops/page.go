package ops

import (
	"embed"
	"io/fs"
	"net/http"
)

// static holds the status page: plain HTML, CSS and JavaScript, no build step, no
// external assets.
//
//go:embed static
var static embed.FS

var staticFS, _ = fs.Sub(static, "static")

// The page's security headers: nothing but its own files, no framing.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// page serves the status page. It holds no data: everything it shows comes from the
// authenticated endpoints, with the token the operator types in (see RATIONALE.md).
func (a *Admin) page(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	http.ServeFileFS(w, r, staticFS, "index.html")
}

func (a *Admin) asset(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	http.StripPrefix("/admin/static/", http.FileServerFS(staticFS)).ServeHTTP(w, r)
}
