package gateway

import (
	"io"
	"net/http"

	"github.com/stategate/stategate/exchange/flow"
)

// flowHeaders are h as the flow reads them (names as net/http keeps them), with the
// request's Host first when host is not empty.
func flowHeaders(h http.Header, host string) flow.Headers {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	out := make(flow.Headers, 0, n+1)
	if host != "" {
		out = append(out, [2]string{"Host", host})
	}
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// setHeaders adds the flow's headers to dst, except Host (net/http's own: the request's
// Host field).
//
// # Notes
//
//   - A name new to dst gets its value in one shared array for all (a slice of capacity
//     one: a later append to it copies), not an array of its own.
func setHeaders(dst http.Header, src flow.Headers) {
	var vals []string
	for _, p := range src {
		k := http.CanonicalHeaderKey(p[0])
		if k == "Host" {
			continue
		}
		if vs, ok := dst[k]; ok {
			dst[k] = append(vs, p[1])
			continue
		}
		if len(vals) == cap(vals) {
			vals = make([]string, 0, len(src))
		}
		vals = append(vals, p[1])
		dst[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
}

// writeDecision writes an answer the flow decided.
func writeDecision(w http.ResponseWriter, d flow.Decision) {
	setHeaders(w.Header(), d.Headers)
	if d.Status != 0 {
		w.WriteHeader(d.Status)
	}
	w.Write(d.Body)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() { flush(s.ResponseWriter) }

// maxPresize bounds the buffer readAll sizes from an announced length.
const maxPresize = 64 << 10

// readAll is io.ReadAll of at most limit bytes of r, into a buffer sized for the size the
// body announced (Content-Length; -1 unknown) up to maxPresize: a body of that size is not
// copied as the buffer grows, and no LimitReader is allocated. Past maxPresize the buffer
// grows as bytes arrive: an announced size is the peer's word, and a client that announces
// 16 MiB and sends one byte must not have the gateway hold 16 MiB for it.
func readAll(r io.Reader, size, limit int64) ([]byte, error) {
	n := int64(512)
	if size > 0 && size < limit {
		n = min(size+1, maxPresize) // +1: the end is seen without growing
	}
	b := make([]byte, 0, min(n, limit))
	for int64(len(b)) < limit {
		if len(b) == cap(b) { // longer than announced
			b = append(b, 0)[:len(b)]
		}
		end := min(int64(cap(b)), limit)
		k, err := r.Read(b[len(b):end])
		b = b[:len(b)+k]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
	return b, nil
}
