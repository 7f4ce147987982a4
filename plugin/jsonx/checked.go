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
//		// read the value at val and say where it ends (c.Done), or leave it to the walk
//	}
//	end, err := c.End()
//
// Keys and separators are validated by Next, values the caller leaves are validated
// (nested at most Depth deep) when the walk moves past them.
type Checked struct {
	s     string
	depth int // how deep each value may nest
	j     int // the next key, or the separator after the current value
	val   int // the current value, -1 before the first
	end   int // offset past the current value once known, else -1
	over  int // offset past the object once walked, else -1
	err   error
}

// CheckObject starts a checked walk of the object at s[i], which may nest depth deep (itself
// counting one).
func CheckObject(s string, i, depth int) Checked {
	c := Checked{s: s, depth: depth - 1, val: -1, end: -1, over: -1}
	switch {
	case depth < 1:
		c.err = &SyntaxError{Offset: i, Msg: "nesting too deep", Deep: true}
	case i >= len(s) || s[i] != '{':
		c.err = bad(view(s), i)
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

// Next moves to the next member, validating what lies between, and returns its key
// (unescaped; a view into s when it has no escapes) and the offset of its value. It
// returns ok false at the end of the object and on an error (End reports it).
func (c *Checked) Next() (key string, val int, ok bool) {
	if c.err != nil || c.over >= 0 {
		return "", 0, false
	}
	s, j := c.s, c.j
	if c.val >= 0 {
		if j = c.end; j < 0 {
			if j, c.err = ValidValue(s, c.val, c.depth); c.err != nil {
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
			c.err = bad(view(s), j)
			return "", 0, false
		}
	}
	if j >= len(s) || s[j] != '"' {
		c.err = bad(view(s), j)
		return "", 0, false
	}
	kEnd, plain, valid := ValidString(s, j)
	if !valid {
		c.err = bad(view(s), j)
		return "", 0, false
	}
	if plain {
		key = s[j+1 : kEnd-1]
	} else {
		key = Unquote(s[j:kEnd])
	}
	if j = kEnd; j < len(s) && s[j] <= ' ' {
		j = skipWSLoop(s, j)
	}
	if j >= len(s) || s[j] != ':' {
		c.err = bad(view(s), j)
		return "", 0, false
	}
	if j++; j < len(s) && s[j] <= ' ' {
		j = skipWSLoop(s, j)
	}
	if j >= len(s) {
		c.err = bad(view(s), j)
		return "", 0, false
	}
	c.val, c.end = j, -1
	return key, j, true
}

// End finishes the walk and returns the offset just past the object, or the first error.
func (c *Checked) End() (int, error) {
	for {
		if _, _, ok := c.Next(); !ok {
			return c.over, c.err
		}
	}
}
