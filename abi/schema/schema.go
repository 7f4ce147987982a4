// Package schema holds the JSON Schemas (draft 2020-12) of the stategate configuration
// and of every plugin export's input and output, as documented in abi/ABI.md.
//
// Every schema's $id is BaseURI followed by its file name, and schemas refer to each
// other by relative URI ("common.schema.json#/$defs/id"), so a validator resolves them
// with a loader that maps BaseURI+name to Files()[name]. abi/schema_test.go proves them
// against every golden vector under abi/testdata.
package schema

import "embed"

// BaseURI is the prefix of every schema's $id.
const BaseURI = "https://stategate.dev/schema/"

//go:embed *.json
var files embed.FS

// Files returns every schema, keyed by file name (e.g. "config.schema.json"). The map
// and its slices are fresh copies on every call.
func Files() map[string][]byte {
	entries, err := files.ReadDir(".")
	if err != nil {
		panic("schema: " + err.Error()) // embedded at build time; cannot fail
	}
	out := make(map[string][]byte, len(entries))
	for _, e := range entries {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			panic("schema: " + err.Error())
		}
		out[e.Name()] = b
	}
	return out
}
