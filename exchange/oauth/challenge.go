package oauth

import "errors"

// authParam is one auth-param (name=value) of a WWW-Authenticate field value, as offsets
// into it: the name is value[name:eq], the value (with its quotes, when quoted) is
// value[start:end].
type authParam struct {
	name, eq, start, end int
	quoted               bool
}

// text is the parameter's value, a quoted-string unescaped.
func (p authParam) text(s string) string {
	if !p.quoted {
		return s[p.start:p.end]
	}
	b := make([]byte, 0, p.end-p.start)
	for i := p.start + 1; i < p.end-1; i++ {
		if s[i] == '\\' {
			i++
		}
		b = append(b, s[i])
	}
	return string(b)
}

// scanChallenges finds the auth-params of every challenge in a WWW-Authenticate field value
// (RFC 9110 11.6.1):
//
//	challenge = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
//	auth-param = token BWS "=" BWS ( token / quoted-string )
//
// challenges and their parameters alike are separated by commas. A token value is read up
// to the next comma or whitespace, as clients read it (a URL is not a token, yet servers
// send it unquoted). An unterminated quoted-string is an error.
func scanChallenges(s string) ([]authParam, error) {
	var out []authParam
	i := 0
	for i < len(s) {
		if s[i] == ',' || isOWS(s[i]) {
			i++
			continue
		}
		t := tokenEnd(s, i)
		if t == i { // not a token: skip to the next element
			i = elementEnd(s, i)
			continue
		}
		if k := skipOWS(s, t); k < len(s) && s[k] == '=' {
			p, next, err := paramAt(s, i, t, k)
			if err != nil {
				return nil, err
			}
			if p.end >= 0 {
				out = append(out, p)
			}
			i = next
			continue
		}
		// An auth-scheme: a token68 or the first auth-param may follow.
		i = skipOWS(s, t)
		if i >= len(s) || s[i] == ',' {
			continue
		}
		n := tokenEnd(s, i)
		if k := skipOWS(s, n); n > i && k < len(s) && s[k] == '=' {
			p, next, err := paramAt(s, i, n, k)
			if err != nil {
				return nil, err
			}
			if p.end >= 0 {
				out = append(out, p)
			}
			i = next
			continue
		}
		i = elementEnd(s, i) // a token68
	}
	return out, nil
}

// paramAt reads the auth-param whose name is s[name:eq0] and whose "=" is at eq. A "="
// followed by "=", a comma or the end is a token68's padding, not a parameter: p.end is
// then -1. It returns the offset after the parameter.
func paramAt(s string, name, eq0, eq int) (p authParam, next int, err error) {
	p = authParam{name: name, eq: eq0, end: -1}
	v := skipOWS(s, eq+1)
	switch {
	case v >= len(s) || s[v] == '=' || s[v] == ',':
		return p, elementEnd(s, eq), nil
	case s[v] == '"':
		for j := v + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '"':
				p.start, p.end, p.quoted = v, j+1, true
				return p, j + 1, nil
			}
		}
		return p, 0, errors.New("www-authenticate: unterminated quoted-string")
	}
	j := v
	for j < len(s) && s[j] != ',' && !isOWS(s[j]) {
		j++
	}
	p.start, p.end = v, j
	return p, j, nil
}

// elementEnd is the offset of the comma that ends the element at i (outside quotes), or
// len(s).
func elementEnd(s string, i int) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case ',':
			return i
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		}
	}
	return len(s)
}

func tokenEnd(s string, i int) int {
	for i < len(s) && isTchar(s[i]) {
		i++
	}
	return i
}

func skipOWS(s string, i int) int {
	for i < len(s) && isOWS(s[i]) {
		i++
	}
	return i
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

// isTchar reports whether c may appear in an RFC 9110 token.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
