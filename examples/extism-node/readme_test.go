package extismnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeBlock answers the fenced code block between "<!-- name: begin -->" and
// "<!-- name: end -->" in the project's README.md, without its fences.
func readmeBlock(t *testing.T, name string) (block, readme string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme = string(raw)
	begin, end := "<!-- "+name+": begin -->\n", "<!-- "+name+": end -->"
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %q ... %q", begin, end)
	}
	block = readme[i+len(begin) : j]
	first := strings.IndexByte(block, '\n')
	if !strings.HasPrefix(block, "```") || first < 0 || !strings.HasSuffix(block, "```\n") {
		t.Fatalf("README.md: the %s block is not one fenced code block", name)
	}
	return block[first+1 : len(block)-len("```\n")], readme
}

// TestReadme_showsTheWholeHost: README's Extism section shows gateway.mjs whole, byte for
// byte, and states its lines of code as TestGatewayIsOnePage counts them.
func TestReadme_showsTheWholeHost(t *testing.T) {
	shown, readme := readmeBlock(t, "gateway.mjs")
	file, err := os.ReadFile("gateway.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if shown != string(file) {
		t.Error("README.md's copy of gateway.mjs differs from the file: copy the file into it")
	}
	m := regexp.MustCompile("`examples/extism-node/gateway.mjs` is that host in Node with `@extism/extism` 1.0.3: ([0-9]+)\\s+lines of code").FindStringSubmatch(readme)
	if n := codeLines(t, "gateway.mjs"); m == nil || m[1] != strconv.Itoa(n) {
		t.Errorf("README.md states %v lines of code for gateway.mjs; it holds %d", m, n)
	}
}

// TestReadme_pythonSketchParses: the untested Python sketch in README.md is at least valid
// Python (no Python registry is reachable here to install extism and run it).
func TestReadme_pythonSketchParses(t *testing.T) {
	sketch, _ := readmeBlock(t, "gateway.py")
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH")
	}
	cmd := exec.Command("python3", "-c", "import ast, sys; ast.parse(sys.stdin.read())")
	cmd.Stdin = strings.NewReader(sketch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("README.md's Python sketch does not parse: %v\n%s", err, out)
	}
}
