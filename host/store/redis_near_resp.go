package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// respValue is one RESP3 message (or one element of one), as the near cache's connection
// reads it from the server (respReader).
//
// # Notes
//
//   - kind is the type byte: '+' simple string, '-' error, ':' integer, '$' bulk string,
//     '_' null (RESP2's $-1 and *-1 too), '*' array, '%' map, '~' set, '>' push, ','
//     double, '#' boolean, '=' verbatim string, '(' big number, '!' bulk error.
//   - str holds the text of strings, errors, big numbers and doubles (as sent) and the
//     payload of a verbatim string (format holds its three-letter format); elems the
//     elements of an array, set or push, and a map's keys and values in turn; attrs the
//     attribute ('|') that came before the value, keys and values in turn (nil: none).
type respValue struct {
	kind   byte
	str    []byte
	format string
	num    int64
	float  float64
	bool   bool
	elems  []respValue
	attrs  []respValue
}

// isError reports whether v is a reply error (simple or bulk).
func (v respValue) isError() bool { return v.kind == '-' || v.kind == '!' }

// err is v as an error (nil when v is not one).
func (v respValue) err() error {
	if !v.isError() {
		return nil
	}
	return &respError{msg: string(v.str)}
}

// respError is an error the server replied with: the command failed, the connection did
// not.
type respError struct{ msg string }

func (e *respError) Error() string { return "redis: " + e.msg }

// Bounds on what the reader accepts. A message past one is a protocol error and closes the
// connection: the server never sends one to the near cache's commands.
const (
	respMaxLine  = 64 << 10  // a simple string, an error, a number or a header line
	respMaxBulk  = 512 << 20 // a bulk string (Redis's own proto-max-bulk-len default)
	respMaxElems = 1 << 20   // elements in one message, all its aggregates together
	respMaxDepth = 32        // aggregates nested in one another
	respChunk    = 1 << 20   // a bulk string longer than this grows as its bytes arrive
)

// errRESP marks a malformed or oversized message.
var errRESP = errors.New("resp3: protocol error")

// respReader reads RESP3 messages.
//
// # Notes
//
//   - It is hostile-input parsing: every length is bounded (respMax*), a length is never
//     allocated before its bytes arrive (past respChunk they grow as they come), nesting is
//     bounded, and a malformed message is an error wrapping errRESP, never a panic.
//   - A push ('>') found inside an aggregate is not counted as one of its elements: it is
//     moved to pushes, in order, for the caller to apply before the message. Redis 6 wrote
//     an invalidation in the middle of a transaction's reply when a key expired while it ran
//     (rueidis patched the reply the same way); Redis 7 never does.
type respReader struct {
	br      *bufio.Reader
	pushes  []respValue // pushes found inside the last message, in order
	elems   int         // elements read in the current message
	started bool        // a byte of the current message has been read
}

func newRESPReader(r io.Reader) *respReader {
	return &respReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// read reads the next message. After it, pushes holds the pushes found inside it.
func (r *respReader) read() (respValue, error) {
	r.pushes = r.pushes[:0]
	r.elems = 0
	r.started = false
	return r.value(0)
}

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errRESP}, args...)...)
}

// value reads one value at nesting depth depth, with any attribute before it.
func (r *respReader) value(depth int) (respValue, error) {
	if depth > respMaxDepth {
		return respValue{}, protoErr("nested deeper than %d", respMaxDepth)
	}
	kind, err := r.br.ReadByte()
	if err != nil {
		if r.started {
			return respValue{}, noEOF(err) // an end of stream inside a message
		}
		return respValue{}, err
	}
	r.started = true
	if kind == '|' {
		attrs, err := r.aggregate('|', depth)
		if err != nil {
			return respValue{}, err
		}
		v, err := r.value(depth + 1) // a chain of attributes nests as deep as it is long
		if err != nil {
			return respValue{}, err
		}
		v.attrs = attrs.elems
		return v, nil
	}
	line, err := r.line()
	if err != nil {
		return respValue{}, err
	}
	v := respValue{kind: kind}
	switch kind {
	case '+', '-':
		v.str = append([]byte{}, line...)
	case ':':
		if v.num, err = parseInt(line); err != nil {
			return respValue{}, err
		}
	case '_':
		if len(line) != 0 {
			return respValue{}, protoErr("null with %q", line)
		}
	case ',':
		if v.float, err = parseDouble(line); err != nil {
			return respValue{}, err
		}
		v.str = append([]byte{}, line...)
	case '#':
		switch string(line) {
		case "t":
			v.bool = true
		case "f":
		default:
			return respValue{}, protoErr("boolean %q", line)
		}
	case '(':
		if !bigNumber(line) {
			return respValue{}, protoErr("big number %q", line)
		}
		v.str = append([]byte{}, line...)
	case '$', '!', '=':
		n, err := parseLen(line, respMaxBulk)
		if err != nil {
			return respValue{}, err
		}
		if n < 0 {
			if kind != '$' {
				return respValue{}, protoErr("null %c", kind)
			}
			return respValue{kind: '_'}, nil // RESP2's null bulk string
		}
		b, err := r.bulk(n)
		if err != nil {
			return respValue{}, err
		}
		v.str = b
		if kind == '=' {
			if len(b) < 4 || b[3] != ':' {
				return respValue{}, protoErr("verbatim string without its format")
			}
			v.format, v.str = string(b[:3]), b[4:]
		}
	case '*', '%', '~', '>':
		n, err := parseLen(line, respMaxElems)
		if err != nil {
			return respValue{}, err
		}
		if n < 0 {
			if kind != '*' {
				return respValue{}, protoErr("null %c", kind)
			}
			return respValue{kind: '_'}, nil // RESP2's null array
		}
		return r.elements(kind, n, depth)
	default:
		return respValue{}, protoErr("type %q", kind)
	}
	return v, nil
}

// aggregate reads the count line and elements of an aggregate whose type byte was read.
func (r *respReader) aggregate(kind byte, depth int) (respValue, error) {
	line, err := r.line()
	if err != nil {
		return respValue{}, err
	}
	n, err := parseLen(line, respMaxElems)
	if err != nil {
		return respValue{}, err
	}
	if n < 0 {
		return respValue{}, protoErr("null %c", kind)
	}
	return r.elements(kind, n, depth)
}

// elements reads the n elements of an aggregate (a map's and an attribute's n pairs).
func (r *respReader) elements(kind byte, n int, depth int) (respValue, error) {
	if kind == '%' || kind == '|' {
		if n > respMaxElems/2 {
			return respValue{}, protoErr("%c of %d pairs", kind, n)
		}
		n *= 2
	}
	if r.elems += n; r.elems > respMaxElems {
		return respValue{}, protoErr("more than %d elements in one message", respMaxElems)
	}
	v := respValue{kind: kind, elems: make([]respValue, 0, min(n, 64))}
	for len(v.elems) < n {
		e, err := r.value(depth + 1)
		if err != nil {
			return respValue{}, err
		}
		if e.kind == '>' && kind != '>' {
			// Out of band: not one of the elements, but counted as one (so empty pushes
			// cannot grow a message without bound).
			if r.elems++; r.elems > respMaxElems {
				return respValue{}, protoErr("more than %d elements in one message", respMaxElems)
			}
			r.pushes = append(r.pushes, e)
			continue
		}
		v.elems = append(v.elems, e)
	}
	return v, nil
}

// line reads up to CRLF and returns what came before it (valid until the next read).
func (r *respReader) line() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// Longer than the buffer: gather it, within respMaxLine.
		buf := append([]byte{}, b...)
		for err == bufio.ErrBufferFull {
			if len(buf) > respMaxLine {
				return nil, protoErr("line longer than %d bytes", respMaxLine)
			}
			b, err = r.br.ReadSlice('\n')
			buf = append(buf, b...)
		}
		b = buf
	}
	if err != nil {
		return nil, noEOF(err)
	}
	if len(b) > respMaxLine+2 {
		return nil, protoErr("line longer than %d bytes", respMaxLine)
	}
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return nil, protoErr("line not ended by CRLF")
	}
	return b[:len(b)-2], nil
}

// bulk reads n bytes and their CRLF into a new slice.
func (r *respReader) bulk(n int) ([]byte, error) {
	var b []byte
	if n <= respChunk {
		b = make([]byte, n)
		if _, err := io.ReadFull(r.br, b); err != nil {
			return nil, noEOF(err)
		}
	} else {
		b = make([]byte, 0, respChunk)
		for len(b) < n {
			k := min(n-len(b), respChunk)
			b = slices.Grow(b, k)[:len(b)+k]
			if _, err := io.ReadFull(r.br, b[len(b)-k:]); err != nil {
				return nil, noEOF(err)
			}
		}
	}
	var crlf [2]byte
	if _, err := io.ReadFull(r.br, crlf[:]); err != nil {
		return nil, noEOF(err)
	}
	if crlf != [2]byte{'\r', '\n'} {
		return nil, protoErr("bulk string not ended by CRLF")
	}
	return b, nil
}

// noEOF turns an end of stream inside a message into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseInt parses a RESP integer: an optional sign and decimal digits, within int64.
func parseInt(b []byte) (int64, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, protoErr("integer %q", b)
	}
	return n, nil
}

// parseLen parses a length: -1 (null) or 0 to limit.
func parseLen(b []byte, limit int) (int, error) {
	n, err := parseInt(b)
	if err != nil {
		return 0, err
	}
	if n < -1 || n > int64(limit) {
		return 0, protoErr("length %d (at most %d)", n, limit)
	}
	return int(n), nil
}

// parseDouble parses a RESP3 double: a decimal or exponent form, inf, -inf or nan.
func parseDouble(b []byte) (float64, error) {
	switch string(b) {
	case "inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	case "nan", "-nan":
		return math.NaN(), nil
	}
	for _, c := range b { // ParseFloat also takes "Inf", "0x1p3", "1_0": the protocol does not
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			return 0, protoErr("double %q", b)
		}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, protoErr("double %q", b)
	}
	return f, nil
}

// bigNumber reports whether b is an optionally signed string of decimal digits.
func bigNumber(b []byte) bool {
	b = bytes.TrimPrefix(b, []byte("-"))
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// appendCommand appends args as a RESP array of bulk strings, as a command is sent.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}
