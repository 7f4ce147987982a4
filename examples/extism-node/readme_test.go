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

// docBlock answers the fenced code block between "<!-- name: begin -->" and
// "<!-- name: end -->" in the project's docs/PAGE, without its fences, and the page.
func docBlock(t *testing.T, page, name string) (block, readme string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	readme = string(raw)
	begin, end := "<!-- "+name+": begin -->\n", "<!-- "+name+": end -->"
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("docs/%s has no %q ... %q", page, begin, end)
	}
	block = readme[i+len(begin) : j]
	first := strings.IndexByte(block, '\n')
	if !strings.HasPrefix(block, "```") || first < 0 || !strings.HasSuffix(block, "```\n") {
		t.Fatalf("docs/%s: the %s block is not one fenced code block", page, name)
	}
	return block[first+1 : len(block)-len("```\n")], readme
}

// TestReadme_showsTheWholeHost: docs/extism-node.md shows gateway.mjs whole, byte for
// byte, and states its lines of code as TestGatewayIsOnePage counts them.
func TestReadme_showsTheWholeHost(t *testing.T) {
	shown, readme := docBlock(t, "extism-node.md", "gateway.mjs")
	file, err := os.ReadFile("gateway.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if shown != string(file) {
		t.Error("docs/extism-node.md's copy of gateway.mjs differs from the file: copy the file into it")
	}
	m := regexp.MustCompile("`examples/extism-node/gateway.mjs` is that host in Node with `@extism/extism` 1.0.3: ([0-9]+)\\s+lines of code").FindStringSubmatch(readme)
	if n := codeLines(t, "gateway.mjs"); m == nil || m[1] != strconv.Itoa(n) {
		t.Errorf("docs/extism-node.md states %v lines of code for gateway.mjs; it holds %d", m, n)
	}
}

// TestReadme_pythonSketchParses: the untested Python sketch in docs/extism.md is at least valid
// Python (no Python registry is reachable here to install extism and run it).
func TestReadme_pythonSketchParses(t *testing.T) {
	sketch, _ := docBlock(t, "extism.md", "gateway.py")
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH")
	}
	cmd := exec.Command("python3", "-c", "import ast, sys; ast.parse(sys.stdin.read())")
	cmd.Stdin = strings.NewReader(sketch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("docs/extism.md's Python sketch does not parse: %v\n%s", err, out)
	}
}
