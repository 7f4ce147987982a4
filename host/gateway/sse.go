package gateway

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// event is one server-sent event as read from a stream: its raw lines (kept verbatim so
// events the gateway does not touch pass through byte for byte) and its joined data.
type event struct {
	raw  []byte // every line of the event including the blank line that ends it
	data []byte // the data lines joined with '\n'
	name string // the event field
	id   string
}

// sseReader reads events from an SSE stream.
type sseReader struct {
	br      *bufio.Reader
	maxLine int
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 64<<10), maxLine: 64 << 20}
}

// next returns the next event; io.EOF after the last one. A stream that ends without a
// final blank line still yields its last event.
func (s *sseReader) next() (*event, error) {
	ev := &event{}
	hasData := false
	for {
		line, err := s.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: collect it whole.
			buf := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				if len(buf) > s.maxLine {
					return nil, errLineTooLong
				}
				line, err = s.br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if len(line) > 0 {
			ev.raw = append(ev.raw, line...)
			content := bytes.TrimRight(line, "\r\n")
			if len(content) == 0 {
				if len(ev.raw) > 0 && (hasData || ev.name != "" || ev.id != "" || len(bytes.TrimSpace(ev.raw)) > 0) {
					return ev, nil
				}
				continue
			}
			field, value := content, []byte(nil)
			if i := bytes.IndexByte(content, ':'); i >= 0 {
				field, value = content[:i], content[i+1:]
				value = bytes.TrimPrefix(value, []byte(" "))
			}
			switch string(field) {
			case "data":
				if hasData {
					ev.data = append(ev.data, '\n')
				}
				ev.data = append(ev.data, value...)
				hasData = true
			case "event":
				ev.name = string(value)
			case "id":
				ev.id = string(value)
			}
		}
		if err != nil {
			if err == io.EOF && len(bytes.TrimSpace(ev.raw)) > 0 {
				return ev, nil
			}
			return nil, err
		}
	}
}

type sseError string

func (e sseError) Error() string { return string(e) }

const errLineTooLong = sseError("sse: line too long")

// appendEvent writes an SSE event carrying data (one JSON document, no newlines) with the
// given id and name.
func appendEvent(dst []byte, name, id string, data []byte) []byte {
	if name != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, '\n')
	}
	if id != "" {
		dst = append(dst, "id: "...)
		dst = append(dst, id...)
		dst = append(dst, '\n')
	}
	for _, line := range strings.Split(string(data), "\n") {
		dst = append(dst, "data: "...)
		dst = append(dst, line...)
		dst = append(dst, '\n')
	}
	return append(dst, '\n')
}
