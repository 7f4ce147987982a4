package jsonx

import "unicode/utf8"

// An Escaping is one way to write a string between JSON's quotes. Every way escapes '"',
// '\\' and the bytes below 0x20; they differ in which controls get a short escape, in '<',
// '>' and '&', and in what becomes of bytes above 0x7f. One loop (Escaping.AppendEscaped)
// writes them all, so a fix to one is a fix to each.
type Escaping struct {
	// controls holds, for each byte below 0x20, the letter after '\\' that writes it
	// short ('n' for "\n"), or 'u' for \u00XX.
	controls string
	// html escapes '<', '>' and '&' as \u003c, \u003e and \u0026.
	html bool
	// unicode reads the bytes above 0x7f as UTF-8: U+2028 and U+2029 become \u2028 and
	// \u2029, and a byte that is not UTF-8 becomes invalid. Without it they are copied.
	unicode bool
	invalid string
}

const (
	//              0x00    0x08    0x10    0x18
	shortNTR    = "uuuuuuuuutnuuruuuuuuuuuuuuuuuuuu" // \t \n \r
	shortBTNFR  = "uuuuuuuubtnufruuuuuuuuuuuuuuuuuu" // \b \t \n \f \r
	replacement = "\ufffd"
)

var (
	// modelText is AppendString's: \t \n \r short, '<', '>' and '&' as they are (these
	// strings are read by models, not by browsers), invalid UTF-8 as U+FFFD itself,
	// U+2028 and U+2029 escaped.
	modelText = Escaping{controls: shortNTR, unicode: true, invalid: replacement}

	// canonical is RFC 8785's: only what it requires ('"', '\\', the controls, with
	// \b \t \n \f \r short); everything else as it is (AppendCanonical has checked UTF-8).
	canonical = Escaping{controls: shortBTNFR}

	// MarshalEscaping is encoding/json.Marshal's: \b \t \n \f \r short, '<', '>' and '&'
	// escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
	MarshalEscaping = &Escaping{controls: shortBTNFR, html: true, unicode: true, invalid: `\ufffd`}
)

// AppendString appends s to dst as a JSON string literal, quotes included.
func (e *Escaping) AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = e.AppendEscaped(dst, s)
	return append(dst, '"')
}

// AppendEscaped appends s escaped as the inside of a JSON string literal (no quotes).
func (e *Escaping) AppendEscaped(dst []byte, s string) []byte {
	html, unicode := e.html, e.unicode
	start := 0
	for i := 0; i < len(s); {
		// The byte after an escape or a rune often needs attention too: it is tested here,
		// and a run is looked for only past a plain byte.
		c := s[i]
		plain := c >= 0x20 && c != '"' && c != '\\'
		if c >= utf8.RuneSelf {
			plain = !unicode
		} else if html && (c == '<' || c == '>' || c == '&') {
			plain = false
		}
		if plain {
			j := escapeRun(s, i+1, unicode)
			for i++; html && i < j; i++ {
				if c := s[i]; c == '<' || c == '>' || c == '&' {
					j = i // rarely hot: encoding/json's escaping is for the exchange's edits
				}
			}
			if i = j; i >= len(s) {
				break
			}
			c = s[i]
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			letter := c // '"' and '\\'
			if c < 0x20 {
				letter = e.controls[c]
			} else if c != '"' && c != '\\' {
				letter = 'u' // '<', '>' and '&'
			}
			if letter == 'u' {
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				dst = append(dst, '\\', letter)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			if size == 1 {
				dst = append(dst, e.invalid...)
			} else {
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			}
			start = i + size
		}
		i += size
	}
	return append(dst, s[start:]...)
}
