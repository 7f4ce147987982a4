package gateway

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/stategate/stategate/exchange/sse"
)

var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
}

func copyHeaders(dst, src http.Header) {
	// Headers named in Connection are hop-by-hop too (RFC 9110 7.6.1).
	var named map[string]bool
	for _, v := range src["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(f)] = true
			}
		}
	}
	for k, v := range src {
		if hopHeaders[k] || named[k] || k == "Proxy-Connection" {
			continue
		}
		dst[k] = append(dst[k][:0:0], v...)
	}
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

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), sub)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// eventReader reads whole SSE events (every line ending the SSE spec allows) off a stream,
// for the gateway's standing GET stream and JSON-only clients.
type eventReader struct {
	r    io.Reader
	buf  []byte
	max  int
	read []byte
	eos  bool
}

func newEventReader(r io.Reader, max int) *eventReader {
	return &eventReader{r: r, max: max, read: make([]byte, 32<<10)}
}

// next returns the next event's bytes; io.EOF after the last one.
func (e *eventReader) next() ([]byte, error) {
	for {
		if ev, rest, ok := sse.Next(e.buf, e.eos); ok {
			out := append([]byte(nil), ev...)
			e.buf = append(e.buf[:0], rest...)
			return out, nil
		}
		if e.eos {
			return nil, io.EOF
		}
		if len(e.buf) > e.max {
			return nil, errEventTooLong
		}
		n, err := e.r.Read(e.read)
		e.buf = append(e.buf, e.read[:n]...)
		if err == io.EOF {
			e.eos = true
		} else if err != nil {
			return nil, err
		}
	}
}

type gwError string

func (e gwError) Error() string { return string(e) }

const errEventTooLong = gwError("sse: event too long")
