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
// runs on them, and stategate.yaml is the configuration docs/configuration.md
// shows (its first JSON block).
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

	page, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(page)
	start := strings.Index(section, "```json\n")
	if !strings.HasPrefix(section, "# Configuration\n") || start < 0 {
		t.Fatal("docs/configuration.md: no \"# Configuration\" page with a JSON block")
	}
	start += len("```json\n")
	end := strings.Index(section[start:], "```")
	if end < 0 {
		t.Fatal("docs/configuration.md: the configuration block is not closed")
	}
	block := section[start : start+end]
	yamlJSON, err := configfile.Load("../../../examples/config/stategate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fromReadme, fromYAML any
	if err := json.Unmarshal([]byte(block), &fromReadme); err != nil {
		t.Fatalf("docs/configuration.md's configuration block: %v\n%s", err, block)
	}
	if err := json.Unmarshal(yamlJSON, &fromYAML); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromReadme, fromYAML) {
		t.Fatalf("examples/config/stategate.yaml is not docs/configuration.md's configuration:\ndocs:   %s\nYAML:   %s", block, yamlJSON)
	}
}
