package main

import (
	"strings"
	"testing"
)

// TestCheck_yaml12: `stategate check` reads YAML as YAML 1.2: a workflow keyed `on:` with
// states named on and off is valid (YAML 1.1 read `on` as true and refused it); a repeated
// key is refused with its line; `yes` where a boolean is expected is refused by name.
func TestCheck_yaml12(t *testing.T) {
	toggle := writeFile(t, "toggle.yaml", `version: 1
workflows:
  - id: lights
    initial: off
    states:
      off:
        on: {TOGGLE: on}
      on:
        on: {TOGGLE: off}
    tools:
      lights.toggle: {states: [off, on], event: TOGGLE}
`)
	if code, out, errOut := runCLI(t, "", "check", toggle); code != 0 || !strings.Contains(out, "valid (0 warning(s))") {
		t.Fatalf("on: as a key: exit %d: %s%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, "", "graph", toggle); code != 0 || !strings.Contains(out, "off --> on : TOGGLE (lights.toggle)") {
		t.Fatalf("graph: exit %d: %s", code, out)
	}
	dup := writeFile(t, "dup.yaml", "version: 1\nlimits:\n  timeoutMs: 1000\n  timeoutMs: 2000\n")
	if code, _, errOut := runCLI(t, "", "check", dup); code != 1 || !strings.Contains(errOut, `line 4: key "timeoutMs" repeated in one mapping (first at line 3)`) {
		t.Fatalf("repeated key: exit %d: %s", code, errOut)
	}
	yes := writeFile(t, "yes.yaml", "version: 1\nstateSync:\n  fromAnnotations: yes\n")
	if code, out, _ := runCLI(t, "", "check", yes); code != 1 || !strings.Contains(out, "stateSync.fromAnnotations") {
		t.Fatalf("fromAnnotations: yes: exit %d: %s", code, out)
	}
}
