package doccheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// Length bounds: README is the front page, a docs page is read in one sitting.
const (
	maxReadmeLines = 320
	maxPageLines   = 420
)

// pages answers the checked documents, as paths relative to the root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) < 10 {
		t.Fatalf("docs/*.md: %d pages, %v", len(docs), err)
	}
	out := []string{"README.md", "ARCHITECTURE.md", "SECURITY.md", "RATIONALE.md", "abi/ABI.md", "envoy/README.md"}
	readmes, _ := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	for _, p := range append(docs, readmes...) {
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

var (
	code    = regexp.MustCompile("`[^`\\n]*`")
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#* *$`)
)

// unfenced answers a Markdown document without its fenced blocks.
func unfenced(doc string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.SplitAfter(doc, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// prose answers a Markdown document without its fenced blocks and code spans, where a
// link or a heading is text, not markup.
func prose(doc string) string {
	return code.ReplaceAllString(unfenced(doc), "")
}

// anchors answers the heading anchors of a Markdown document as GitHub makes them:
// lowercase, punctuation dropped but for '-' and '_', spaces as '-', a repeated one
// numbered (-1, -2, ...).
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(unfenced(doc), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127 && r != '—' && r != '–':
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestDocs_linksResolve: every relative link names a file or folder of the repository, and
// every #anchor a heading of the page it points into.
func TestDocs_linksResolve(t *testing.T) {
	n := 0
	known := map[string]map[string]bool{} // page -> its anchors
	for _, page := range pages(t) {
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(prose(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
				if strings.HasPrefix(path, "../") {
					t.Errorf("%s: link %s leaves the repository", page, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					t.Errorf("%s: link %s: no file %s", page, target, path)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if known[path] == nil {
				doc, err := os.ReadFile(filepath.Join(root, path))
				if err != nil {
					t.Errorf("%s: link %s: %v", page, target, err)
					continue
				}
				known[path] = anchors(string(doc))
			}
			if !known[path][anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, path, anchor)
			}
		}
	}
	if n < 50 {
		t.Fatalf("only %d relative links found: the check reads nothing", n)
	}
}

// TestDocs_length: README is a front page, and no docs page is longer than one sitting.
func TestDocs_length(t *testing.T) {
	for _, page := range pages(t) {
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Count(raw, []byte("\n"))
		switch {
		case page == "README.md" && lines > maxReadmeLines:
			t.Errorf("README.md has %d lines; at most %d: move a section into docs/", lines, maxReadmeLines)
		case strings.HasPrefix(page, "docs/") && lines > maxPageLines:
			t.Errorf("%s has %d lines; at most %d: split it into two pages", page, lines, maxPageLines)
		}
	}
}

// TestDocs_pagesOpenAndAreLinked: every docs page starts with its title and one sentence
// saying what it is for, and README links it.
func TestDocs_pagesOpenAndAreLinked(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages(t) {
		if !strings.HasPrefix(page, "docs/") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.SplitN(string(raw), "\n\n", 3)
		if len(parts) < 3 || !strings.HasPrefix(parts[0], "# ") || strings.Contains(parts[0], "\n") ||
			strings.HasPrefix(parts[1], "#") || strings.HasPrefix(parts[1], "`") || strings.HasPrefix(parts[1], "|") {
			t.Errorf("%s does not open with a title and a sentence saying what it is for", page)
		}
		if !bytes.Contains(readme, []byte("]("+page+")")) {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

// TestReadme_beforeAndAfter: the before/after README shows is the engine's, as its golden
// vectors hold it: the tool of a tools/list, and the result of a tools/call.
func TestReadme_beforeAndAfter(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	i := strings.Index(section, "### Before and after")
	if i < 0 {
		t.Fatal(`README.md has no "Before and after" section`)
	}
	section = section[i:]
	for _, c := range []struct {
		vector string
		path   func(any) any
	}{
		{"decorate_tools/adds_cache_control_tags.json", func(m any) any { return dig(m, "result", "tools", 0) }},
		{"decorate_result/successful_mutation_inserts_block.json", func(m any) any { return dig(m, "result") }},
	} {
		start := strings.Index(section, "```json\n")
		if start < 0 {
			t.Fatalf("README.md: no JSON block for %s", c.vector)
		}
		section = section[start+len("```json\n"):]
		end := strings.Index(section, "```")
		if end < 0 {
			t.Fatalf("README.md: the JSON block for %s is not closed", c.vector)
		}
		dec := json.NewDecoder(strings.NewReader(section[:end]))
		var shown [2]any
		for k := range shown {
			if err := dec.Decode(&shown[k]); err != nil {
				t.Fatalf("README.md's block for %s: %v", c.vector, err)
			}
		}
		section = section[end+3:]
		raw, err := os.ReadFile(filepath.Join(root, "abi", "testdata", c.vector))
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Input  struct{ Message any } `json:"input"`
			Output struct{ Message any } `json:"output"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		for k, want := range []any{c.path(v.Input.Message), c.path(v.Output.Message)} {
			if !reflect.DeepEqual(shown[k], want) {
				t.Errorf("README.md's %s for %s:\n got %v\nwant %v", [2]string{"before", "after"}[k], c.vector, shown[k], want)
			}
		}
	}
}

// dig answers the value at a path of object members and array indexes, or nil.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// repoPath is a code span naming a file or folder of the repository: a top-level folder of
// the project, then a path ending in a file name with an extension or in '/'. Package
// members (`exchange/toollist.Tools`) and Go's own packages (`internal/strconv`) are not.
var repoPath = regexp.MustCompile("^`((?:abi|plugin|exchange|host|envoy|httpwasm|examples|testharness|internal|scripts|docs)/(?:[A-Za-z0-9_.-]+/)*(?:[A-Za-z0-9_-]+\\.[a-z]{1,5}|))`$")

// TestDocs_pathsExist: every file or folder a page names in a code span exists, so a page
// cannot go on naming a file that moved.
func TestDocs_pathsExist(t *testing.T) {
	for _, page := range pages(t) {
		doc, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, span := range code.FindAllString(unfenced(string(doc)), -1) {
			m := repoPath.FindStringSubmatch(span)
			if m == nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
				t.Errorf("%s names %s, which does not exist", page, span)
			}
		}
	}
}
