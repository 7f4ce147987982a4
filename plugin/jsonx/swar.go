package jsonx

import "math/bits"

// Word-at-a-time scanning (SWAR: SIMD within a register). The hot loops of the engine
// look for a few byte values in long runs of plain string text; reading eight bytes as one
// 64-bit word and testing all eight at once with a handful of integer operations makes
// those loops about eight times shorter, natively and in wasm (i64 is a native wasm type).
//
// Each test below sets the high bit of every byte of the word that matches. Borrows run
// only from a matching byte towards higher bytes, so bytes above the first match may be
// flagged wrongly, but the lowest flagged byte is always exact: callers use only that one
// (bits.TrailingZeros64(m) >> 3 is its index) and then fall back to their byte-wise rules.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// zeroBytes flags the zero bytes of x.
func zeroBytes(x uint64) uint64 { return (x - ones) & ^x & highs }

// quoteOrBackslash flags the bytes '"' and '\\'.
func quoteOrBackslash(x uint64) uint64 {
	return zeroBytes(x^(ones*'"')) | zeroBytes(x^(ones*'\\'))
}

// controls flags the bytes below 0x20.
func controls(x uint64) uint64 { return (x - ones*0x20) & ^x & highs }

// load64 reads s[i:i+8] as a little-endian word (the compilers turn it into one load).
//
//go:nobounds
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

//go:nobounds
func load64b(b []byte, i int) uint64 {
	b = b[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// firstFlagged is the index of the lowest flagged byte of a non-zero mask.
func firstFlagged(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// plainRunBytes returns the first offset at or after i whose byte is '"', '\\' or below
// 0x20 in a string inside a document, or len(b): the bytes before it need no attention.
//
//go:nobounds
func plainRunBytes(b []byte, i int) int {
	for i+8 <= len(b) {
		x := load64b(b, i)
		if m := quoteOrBackslash(x) | controls(x); m != 0 {
			return i + firstFlagged(m)
		}
		i += 8
	}
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	return i
}

// asciiRun returns the first offset at or after i whose byte is '"', '\\', below 0x20 or
// not ASCII, or len(s): the bytes before it are copied to a JSON string as they are.
func asciiRun(s string, i int) int { return escapeRun(s, i, true) }

// escapeRun returns the first offset at or after i whose byte is '"', '\\', below 0x20, or
// with high above 0x7f; or len(s).
//
//go:nobounds
func escapeRun(s string, i int, high bool) int {
	var highMask uint64
	if high {
		highMask = highs
	}
	for i+8 <= len(s) {
		x := load64(s, i)
		if m := quoteOrBackslash(x) | controls(x) | x&highMask; m != 0 {
			return i + firstFlagged(m)
		}
		i += 8
	}
	for i < len(s) {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 || high && c >= 0x80 {
			break
		}
		i++
	}
	return i
}

// PlainASCII returns the first offset at or after i whose byte is not copied to a JSON
// string as it is ('"', '\\', below 0x20, or not ASCII), or len(s).
func PlainASCII(s string, i int) int { return asciiRun(s, i) }

// quoteRun returns the first offset at or after i whose byte is '"' or '\\', or len(s).
//
//go:nobounds
func quoteRun(s string, i int) int {
	for i+8 <= len(s) {
		if m := quoteOrBackslash(load64(s, i)); m != 0 {
			return i + firstFlagged(m)
		}
		i += 8
	}
	for i < len(s) && s[i] != '"' && s[i] != '\\' {
		i++
	}
	return i
}

// escapeOrHighRun returns the first offset at or after i whose byte is '\\' or not
// ASCII, or len(s).
func escapeOrHighRun(s string, i int) int {
	for i+8 <= len(s) {
		x := load64(s, i)
		if m := zeroBytes(x^(ones*'\\')) | x&highs; m != 0 {
			return i + firstFlagged(m)
		}
		i += 8
	}
	for i < len(s) && s[i] != '\\' && s[i] < 0x80 {
		i++
	}
	return i
}

// StringEnd returns the offset just past the string literal whose opening quote is at
// data[i] (escapes skipped, nothing checked), or len(data) when it is not closed. For
// scanners of already validated documents.
func StringEnd(data []byte, i int) int { return skipStr(unsafeString(data), i) }

// IndexByte is strings.IndexByte a word at a time: TinyGo's is a byte loop (Go's is
// vectorised already, so natively this gives nothing and costs little).
func IndexByte(s string, c byte) int {
	pat := ones * uint64(c)
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if m := zeroBytes(load64(s, i) ^ pat); m != 0 {
			return i + firstFlagged(m)
		}
	}
	for ; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// CountByte returns how many bytes of b are c, a word at a time. Unlike the scans above
// it needs every flag exact, so it uses the carry-free test: (x&0x7f..)+0x7f.. sets the
// high bit of every byte whose low seven bits are not all zero, without a carry into the
// next byte.
func CountByte(b []byte, c byte) int {
	const lows = 0x7f7f7f7f7f7f7f7f
	pat := ones * uint64(c)
	n, i := 0, 0
	for ; i+8 <= len(b); i += 8 {
		t := load64b(b, i) ^ pat
		n += bits.OnesCount64(^(((t & lows) + lows) | t) & highs)
	}
	for ; i < len(b); i++ {
		if b[i] == c {
			n++
		}
	}
	return n
}
