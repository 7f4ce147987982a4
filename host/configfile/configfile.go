// Package configfile reads a stategate configuration file, JSON or YAML, as the JSON
// document the engine takes. It is the one place the host reads YAML: every command that
// takes a configuration (serve, check, explain, graph, call, intercept, reload) goes
// through Load.
//
// YAML is read with YAML 1.2 semantics (the core schema), so what people write means what
// it says: `on:` is the key "on", and yes, no, on, off, y and n are strings. The engine's
// parser, with the JSON Schema as its documented superset (abi/schema), stays the authority
// on what a configuration may hold: this package only turns YAML into JSON, and refuses
// what JSON cannot say or what could be read two ways (repeated keys, merge keys, tags it
// does not know, several documents).
package configfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MaxBytes bounds a configuration file.
const MaxBytes = 4 << 20

// Load reads the configuration at path and returns it as JSON.
func Load(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	js, err := Decode(raw, strings.EqualFold(filepath.Ext(path), ".json"))
	if err != nil {
		return nil, fmt.Errorf("config[%s]: %w", path, err)
	}
	return js, nil
}

// Decode returns a configuration's text as JSON: text that is valid JSON as it is, anything
// else read as YAML 1.2 (YAMLToJSON). With jsonOnly (a .json file), text that is not valid
// JSON is refused with the JSON error rather than read as YAML.
func Decode(raw []byte, jsonOnly bool) ([]byte, error) {
	if len(raw) > MaxBytes {
		return nil, fmt.Errorf("%d bytes, over the limit of %d", len(raw), MaxBytes)
	}
	if json.Valid(raw) {
		return raw, nil
	}
	if jsonOnly {
		var v any
		err := json.Unmarshal(raw, &v)
		if se, ok := err.(*json.SyntaxError); ok {
			line := 1 + bytes.Count(raw[:min(int(se.Offset), len(raw))], []byte("\n"))
			return nil, fmt.Errorf("not valid JSON: line %d: %v", line, err)
		}
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	return YAMLToJSON(raw)
}
