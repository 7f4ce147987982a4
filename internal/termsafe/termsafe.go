// Package termsafe renders untrusted text (tool names, reasons, upstream errors, session
// ids) for a terminal or a text log, so that nothing an upstream or a client chose can
// act on the operator's terminal.
//
// # Notes
//
//   - Escaped: C0 controls and DEL (\x1b, \x07, \x7f; \t, \n and \r as such), C1
//     controls (\u009b), Unicode bidi and invisible format characters (\u202e, \u2066,
//     \u200b, \ufeff, ...), and bytes that are not UTF-8 (\xff). The backslash itself is
//     doubled, so two different strings never render the same.
//   - Everything else, ASCII or not, is left as it is; a string with nothing to escape is
//     returned as given, without allocating.
//   - The character set is a fixed list, not Unicode tables, so the package builds small
//     under TinyGo (the Envoy filter's logs use it too).
package termsafe

import (
	"strconv"
	"unicode/utf8"
)

// String renders s for a terminal: every control, bidi or invisible format character
// and every byte that is not UTF-8 becomes a visible escape (see the package notes).
func String(s string) string { return render(s, false) }

// Lines renders a message (an error, possibly of several lines) for a terminal: like
// String, but line feeds are kept and backslashes are left alone (a message may quote
// text an encoder already escaped, such as "\u001b"). Carriage returns and every other
// control are still escaped.
func Lines(s string) string { return render(s, true) }

func render(s string, message bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, n) && !(message && (r == '\n' || r == '\\')) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case message && (r == '\n' || r == '\\'):
			b = append(b, byte(r))
		case r == utf8.RuneError && n == 1:
			b = appendHex(append(b, `\x`...), uint32(s[i]), 2)
		case r == '\\':
			b = append(b, `\\`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r < 0x20 || r == 0x7f:
			b = appendHex(append(b, `\x`...), uint32(r), 2)
		case needsEscape(r, n):
			b = appendHex(append(b, `\u`...), uint32(r), 4)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

// needsEscape reports whether the rune r (n bytes long) is shown as an escape.
func needsEscape(r rune, n int) bool {
	if r == utf8.RuneError && n == 1 {
		return true // not UTF-8
	}
	return r == '\\' || Control(r)
}

// Control reports whether r is a character a terminal or a text display may act on or
// hide: a C0 or C1 control, DEL, or a bidi or invisible format character.
func Control(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r < 0x61c:
		return false
	}
	switch {
	case r == 0x061c, // ARABIC LETTER MARK
		r == 0x180e,                // MONGOLIAN VOWEL SEPARATOR
		r >= 0x200b && r <= 0x200f, // zero-width space, joiners, LRM, RLM
		r >= 0x2028 && r <= 0x202e, // line and paragraph separators, LRE, RLE, PDF, LRO, RLO
		r >= 0x2060 && r <= 0x206f, // word joiner, invisible operators, LRI, RLI, FSI, PDI, ...
		r == 0xfeff,                // zero-width no-break space (BOM)
		r >= 0xfff9 && r <= 0xfffb: // interlinear annotation
		return true
	}
	return false
}

func appendHex(b []byte, v uint32, width int) []byte {
	h := strconv.FormatUint(uint64(v), 16)
	for i := len(h); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, h...)
}
