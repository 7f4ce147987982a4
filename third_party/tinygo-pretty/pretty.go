// Package pretty stands in for github.com/tidwall/pretty in the TinyGo build of the
// plugin only (make build; see RATIONALE.md "The plugin's pretty stand-in").
//
// gjson reaches pretty only through its @pretty and @ugly path modifiers, which the
// engine never uses: every path it builds is a constant or gjson.Escape'd. The real
// package imports encoding/json for one key-sorting option, and with it reflection and
// fmt: about 140 KB of the TinyGo module. This stand-in has the API gjson and sjson call;
// Pretty returns the document unchanged and Ugly removes whitespace outside strings.
package pretty

// Options is the API of the real package; the stand-in ignores it.
type Options struct {
	Width    int
	Prefix   string
	Indent   string
	SortKeys bool
}

// DefaultOptions is the API of the real package.
var DefaultOptions = &Options{Width: 80, Prefix: "", Indent: "  ", SortKeys: false}

// Pretty returns a copy of json, unchanged.
func Pretty(json []byte) []byte { return PrettyOptions(json, nil) }

// PrettyOptions returns a copy of json, unchanged.
func PrettyOptions(json []byte, opts *Options) []byte { return append([]byte(nil), json...) }

// Ugly returns json without whitespace outside strings.
func Ugly(json []byte) []byte {
	out := make([]byte, 0, len(json))
	in, esc := false, false
	for _, c := range json {
		switch {
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		out = append(out, c)
	}
	return out
}
