package termsafe

import (
	"io"
	"unicode/utf8"
)

// JSON renders a JSON text (one event, one log line) for a terminal without changing its
// meaning: every control, bidi or invisible format character becomes a \u escape, and
// every byte that is not UTF-8 becomes \ufffd (as Go's encoders would have written it).
// Tabs and line feeds are kept: JSON encoders emit them only as whitespace between
// values, never raw inside a string.
//
// # Notes
//
//   - In valid JSON such characters can stand only inside strings, where \uXXXX means
//     the same character: the output decodes to what the input did. Go's encoders
//     already escape C0 controls; DEL, C1 controls and U+202E are the ones they leave raw.
func JSON(b []byte) []byte {
	i := 0
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if jsonEscape(r, n) {
			break
		}
		i += n
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = append(out, `\ufffd`...)
		case jsonEscape(r, n):
			out = appendHex(append(out, `\u`...), uint32(r), 4)
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

func jsonEscape(r rune, n int) bool {
	if r == utf8.RuneError && n == 1 {
		return true
	}
	return r != '\t' && r != '\n' && Control(r)
}

// Writer wraps w so that every Write is rendered with JSON first: for a JSON log handler
// writing to a terminal. Each Write must hold whole JSON texts (log/slog's handlers
// write one record per call).
func Writer(w io.Writer) *JSONWriter { return &JSONWriter{w: w} }

// JSONWriter is the writer Writer returns.
type JSONWriter struct {
	w io.Writer
}

// Write writes JSON(p) and reports len(p) on success.
func (j *JSONWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
