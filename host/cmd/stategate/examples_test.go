package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stategate/stategate/host/configfile"
)

// TestExamples: the configurations shipped in examples/config are valid and meet every
// tool of examples/config/tools.json (the demo upstream's list) without a warning, explain
// runs on them, and stategate.yaml is the configuration README's "Configuration" section
// shows.
func TestExamples(t *testing.T) {
	files, _ := filepath.Glob("../../../examples/config/*.yaml")
	if len(files) < 2 {
		t.Fatalf("examples/config holds %d configurations", len(files))
	}
	for _, f := range files {
		code, out, errOut := runCLI(t, "", "check", f, "--tools", "../../../examples/config/tools.json")
		if code != 0 || !strings.Contains(out, "valid (0 warning(s))") {
			t.Errorf("check %s: exit %d\n%s%s", f, code, out, errOut)
		}
		if code, out, errOut := runCLI(t, "", "explain", "--config", f, "--tools", "../../../examples/config/tools.json"); code != 0 || !strings.Contains(out, "cart.pay") {
			t.Errorf("explain %s: exit %d\n%s%s", f, code, out, errOut)
		}
	}

	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme[strings.Index(string(readme), "## Configuration"):])
	start := strings.Index(section, "```json\n") + len("```json\n")
	block := section[start : start+strings.Index(section[start:], "```")]
	yamlJSON, err := configfile.Load("../../../examples/config/stategate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fromReadme, fromYAML any
	if err := json.Unmarshal([]byte(block), &fromReadme); err != nil {
		t.Fatalf("README's configuration block: %v\n%s", err, block)
	}
	if err := json.Unmarshal(yamlJSON, &fromYAML); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromReadme, fromYAML) {
		t.Fatalf("examples/config/stategate.yaml is not README's configuration:\nREADME: %s\nYAML:   %s", block, yamlJSON)
	}
}
