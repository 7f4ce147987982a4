package jsonx

// Checked reading: walking a document that has not been validated, validating everything
// on the way, so that a reader that needs only a few members of a large document reads it
// in one pass instead of validating it first and walking it after. What the reader does
// not read itself, the walk validates (ValidValue); a document the walk accepts is one
// Validate accepts, and any problem stops the walk with an error. The errors say little:
// a caller that reports them runs Validate for the exact message.

// ValidString validates the string literal whose opening quote is at s[i] and returns the
// offset just past it, and ok false when it is not a valid literal. plain reports a
// literal without escapes and with only ASCII bytes: its value is then s[i+1 : end-1],
// as it is. It never allocates (in TinyGo, a function that may allocate pays for a GC
// frame on every call, and this runs for every string a one-pass reader meets).
//
//go:nobounds
func ValidString(s string, i int) (end int, plain, ok bool) {
	j := asciiRun(s, i+1)
	if j < len(s) && s[j] == '"' {
		return j + 1, true, true
	}
	end, f := stringEnd(view(s), j)
	return end, false, f == faultNone
}

// Checked walks the members of an object in a document not yet validated:
//
//	c := CheckObject(s, i, depth)
//	for key, val, ok := c.Next(); ok; key, val, ok = c.Next() {
//		if c.Escaped() {
//			key = c.Key()
//		}
//		// read the value at val and say where it ends (c.Done), or leave it to the walk
//	}
//	end, err := c.End()
//
// Keys and separators are validated by Next, values the caller leaves are validated
// (nested at most Depth deep) when the walk moves past them. Nothing but End allocates.
type Checked struct {
	s       string
	depth   int  // how deep each value may nest
	j       int  // the first key (Next moves on from the current value after that)
	key     int  // the current key's opening quote
	escaped bool // the current key is not plain (ValidString)
	val     int  // the current value, -1 before the first
	end     int  // offset past the current value once known, else -1
	over    int  // offset past the object once walked, else -1
	at      int  // where the walk failed
	fault   uint8
}

// CheckObject starts a checked walk of the object at s[i], which may nest depth deep (itself
// counting one; a depth over 512 counts as 512).
//
//go:nobounds
func CheckObject(s string, i, depth int) Checked {
	depth = min(depth, inPlaceLevels)
	c := Checked{s: s, depth: depth - 1, val: -1, end: -1, over: -1}
	switch {
	case depth < 1:
		c.at, c.fault = i, faultDeep
	case i >= len(s) || s[i] != '{':
		c.at, c.fault = i, faultChar
	default:
		c.j = SkipWS(s, i+1)
		if c.j < len(s) && s[c.j] == '}' {
			c.over = c.j + 1
		}
	}
	return c
}

// Depth is how deep a value of the object may nest.
func (c *Checked) Depth() int { return c.depth }

// Done tells the walk that the caller validated the current value and where it ends.
func (c *Checked) Done(end int) { c.end = end }

// Next moves to the next member, validating what lies between, and returns its key and
// the offset of its value. The key is the literal's body, a view into s: its value unless
// Escaped. It returns ok false at the end of the object and on an error (End reports it).
//
//go:nobounds
func (c *Checked) Next() (key string, val int, ok bool) {
	if c.fault != faultNone || c.over >= 0 {
		return "", 0, false
	}
	s, j := c.s, c.j
	if c.val >= 0 {
		if j = c.end; j < 0 {
			var f uint8
			if j, f = validValue(s, c.val, c.depth); f != faultNone {
				c.at, c.fault = j, f
				return "", 0, false
			}
		}
		if j < len(s) && s[j] <= ' ' {
			j = skipWSLoop(s, j)
		}
		switch {
		case j < len(s) && s[j] == ',':
			if j++; j < len(s) && s[j] <= ' ' {
				j = skipWSLoop(s, j)
			}
		case j < len(s) && s[j] == '}':
			c.over = j + 1
			return "", 0, false
		default:
			c.at, c.fault = j, faultChar
			return "", 0, false
		}
	}
	if j >= len(s) || s[j] != '"' {
		c.at, c.fault = j, faultChar
		return "", 0, false
	}
	kEnd, plain, valid := ValidString(s, j)
	if !valid {
		c.at, c.fault = j, faultChar // End re-reads the literal for the exact fault
		return "", 0, false
	}
	c.key, c.escaped = j, !plain
	key = s[j+1 : kEnd-1]
	if j = kEnd; j < len(s) && s[j] <= ' ' {
		j = skipWSLoop(s, j)
	}
	if j >= len(s) || s[j] != ':' {
		c.at, c.fault = j, faultChar
		return "", 0, false
	}
	if j++; j < len(s) && s[j] <= ' ' {
		j = skipWSLoop(s, j)
	}
	if j >= len(s) {
		c.at, c.fault = j, faultEOF
		return "", 0, false
	}
	c.val, c.end = j, -1
	return key, j, true
}

// Escaped reports whether the current key's literal has escapes or bytes that are not
// ASCII: Key then gives its value.
func (c *Checked) Escaped() bool { return c.escaped }

// Key returns the current key's value, unescaped (it may allocate).
func (c *Checked) Key() string {
	end := SkipValue(c.s, c.key)
	return Unquote(c.s[c.key:end])
}

// End finishes the walk and returns the offset just past the object, or the first error.
func (c *Checked) End() (int, error) {
	for {
		if _, _, ok := c.Next(); !ok {
			break
		}
	}
	if c.fault == faultNone {
		return c.over, nil
	}
	at, f := c.at, c.fault
	if f == faultChar && at < len(c.s) && c.s[at] == '"' {
		if end, sf := stringEnd(view(c.s), at+1); sf != faultNone {
			at, f = end, sf
		}
	}
	return 0, errorOf(view(c.s), at, f, c.depth+1)
}
