// Package sse frames Server-Sent Events as the exchange core reads and writes them: it
// splits a stream into events, reads an event's data, and writes events.
//
// # Notes
//
//   - Lines end with CRLF, LF or CR (the SSE spec allows all three); a CR at the very end of
//     the buffer is not decided until the next byte is known (it may be half of a CRLF).
//   - An event is every line up to and including the blank line that ends it; events the
//     core does not rewrite pass through byte for byte.
package sse

import "bytes"

// Next splits the first complete SSE event off buf: the event's bytes including the
// blank line that ends it, and the rest. ok is false when buf holds no complete event yet;
// with eos, a last event without its blank line is complete.
func Next(buf []byte, eos bool) (event, rest []byte, ok bool) {
	lineStart := 0
	for i := 0; i < len(buf); i++ {
		c := buf[i]
		if c != '\n' && c != '\r' {
			continue
		}
		end := i + 1
		if c == '\r' {
			if i+1 == len(buf) && !eos {
				return nil, buf, false
			}
			if i+1 < len(buf) && buf[i+1] == '\n' {
				end = i + 2
			}
		}
		if i == lineStart { // an empty line ends the event
			return buf[:end], buf[end:], true
		}
		lineStart = end
		i = end - 1
	}
	if eos && len(bytes.TrimSpace(buf)) > 0 {
		return buf, nil, true
	}
	return nil, buf, false
}

// Data returns the event's data: its data lines joined with "\n", the one space after
// "data:" removed. has is false for an event without data lines.
func Data(event []byte) (data []byte, has bool) {
	forEachLine(event, func(line []byte) {
		if v, ok := field(line, "data"); ok {
			if has {
				data = append(data, '\n')
			}
			data = append(data, v...)
			has = true
		}
	})
	return data, has
}

// Rewrite appends event with its data replaced by data: every non-data line kept in
// order, then one "data: " line per line of data, then the blank line.
func Rewrite(dst, event, data []byte) []byte {
	forEachLine(event, func(line []byte) {
		if len(line) == 0 {
			return
		}
		if _, ok := field(line, "data"); ok {
			return
		}
		dst = append(dst, line...)
		dst = append(dst, '\n')
	})
	return appendData(dst, data)
}

// Append appends a "message" event carrying data.
func Append(dst, data []byte) []byte {
	dst = append(dst, "event: message\n"...)
	return appendData(dst, data)
}

// appendData writes data as data lines, a line break in data (CRLF, LF, or a lone CR, all
// of which end a line for an SSE reader) ending each: a CR left inside a data line would
// end it early for the client, which would then read the rest as another line.
func appendData(dst, data []byte) []byte {
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// forEachLine calls f with each line of event, without its line ending.
func forEachLine(event []byte, f func([]byte)) {
	for len(event) > 0 {
		i := bytes.IndexAny(event, "\r\n")
		if i < 0 {
			f(event)
			return
		}
		f(event[:i])
		if event[i] == '\r' && i+1 < len(event) && event[i+1] == '\n' {
			i++
		}
		event = event[i+1:]
	}
}

// field reports whether line is the SSE field name, and its value.
func field(line []byte, name string) ([]byte, bool) {
	if !bytes.HasPrefix(line, []byte(name)) {
		return nil, false
	}
	rest := line[len(name):]
	if len(rest) == 0 {
		return nil, true
	}
	if rest[0] != ':' {
		return nil, false
	}
	rest = rest[1:]
	if len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	return rest, true
}
