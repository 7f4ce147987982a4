// Package pretty stands in for github.com/tidwall/pretty in the TinyGo build of the plugin
// only (the Makefile builds it with GOFLAGS=-modfile=build/tinygo.mod, which replaces the
// module with this directory). gjson registers its @pretty and @ugly path modifiers with
// this package at start-up, so every TinyGo module that uses gjson carries pretty, and
// pretty imports encoding/json, which brings reflection, fmt and sorting: about 150 KB of
// a 400 KB module for code the engine never runs (it never builds a gjson path with a
// modifier; every path made from input goes through gjson.Escape). Here the two
// modifiers hand their input back unchanged. The host, the tests and the standard-Go
// builds use the real package. See RATIONALE.md.
package pretty

// Options mirrors the real package's options; they are ignored.
type Options struct {
	Width    int
	Prefix   string
	Indent   string
	SortKeys bool
}

// DefaultOptions mirrors the real package's defaults.
var DefaultOptions = &Options{Width: 80, Prefix: "", Indent: "  ", SortKeys: false}

// Pretty returns a copy of json unchanged.
func Pretty(json []byte) []byte { return PrettyOptions(json, nil) }

// PrettyOptions returns a copy of json unchanged.
func PrettyOptions(json []byte, _ *Options) []byte { return append([]byte(nil), json...) }

// Ugly returns a copy of json unchanged.
func Ugly(json []byte) []byte { return append([]byte(nil), json...) }
