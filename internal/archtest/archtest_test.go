// Package archtest keeps ARCHITECTURE.md honest: every path it names exists, and the import
// rules it states hold for the product's code (tests aside).
package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/stategate/stategate/"

// root is the repository's root, from this package's folder.
const root = "../.."

// TestArchitecture_pathsExist: every backticked path in ARCHITECTURE.md (a word holding a
// slash, or a file name) names a file or folder of the repository; build outputs aside.
func TestArchitecture_pathsExist(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile("`([^`\\s]+)`").FindAllStringSubmatch(string(doc), -1) {
		p := m[1]
		if !strings.Contains(p, "/") && !strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, ".md") {
			continue // a name (abi.IsWorkflowKey), not a path
		}
		if strings.HasPrefix(p, "build/") || strings.Contains(p, "*") || strings.HasPrefix(p, "notifications/") ||
			strings.HasPrefix(p, "tools/") || strings.HasPrefix(p, "Mcp-") {
			continue // built outputs, patterns, MCP method names
		}
		n++
		if _, err := os.Stat(filepath.Join(root, strings.TrimSuffix(p, "/"))); err != nil {
			t.Errorf("ARCHITECTURE.md names %s, which does not exist", p)
		}
	}
	if n < 30 {
		t.Fatalf("only %d paths found in ARCHITECTURE.md: the check reads nothing", n)
	}
}

// rule is one import rule: product code under from may not import packages under any of
// deny.
type rule struct {
	from string
	deny []string
}

var rules = []rule{
	{from: "plugin/", deny: []string{"exchange/", "host/", "envoy/", "examples/"}},
	{from: "abi/", deny: []string{"plugin/", "exchange/", "host/", "envoy/", "examples/", "internal/", "testharness/"}},
	{from: "exchange/", deny: []string{"host/", "envoy/", "examples/"}},
}

// TestArchitecture_importRules: no import runs up a floor.
func TestArchitecture_importRules(t *testing.T) {
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" || rel == "build" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if !strings.HasPrefix(rel, r.from) {
				continue
			}
			seen++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				target, ok := strings.CutPrefix(p, module)
				if !ok {
					continue
				}
				for _, deny := range r.deny {
					if strings.HasPrefix(target+"/", deny) {
						t.Errorf("%s imports %s: %s may not import %s (ARCHITECTURE.md, import rules)", rel, p, r.from, deny)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 50 {
		t.Fatalf("only %d files checked: the walk reads nothing", seen)
	}
}
