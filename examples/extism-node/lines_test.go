package extismnode

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// pageLimit is the most lines of code gateway.mjs may hold (issue 26: a host is a page).
const pageLimit = 250

// codeLines counts the lines of a JavaScript file that hold code: not blank, not only a //
// comment (the file uses no block comments).
func codeLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "/*") {
			t.Fatalf("%s: a block comment; this count knows only // comments", path)
		}
		if line != "" && !strings.HasPrefix(line, "//") {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGatewayIsOnePage: gateway.mjs holds at most pageLimit lines of code, comments and
// blank lines aside.
func TestGatewayIsOnePage(t *testing.T) {
	n := codeLines(t, "gateway.mjs")
	t.Logf("gateway.mjs: %d lines of code", n)
	if n > pageLimit {
		t.Errorf("gateway.mjs holds %d lines of code; a one-page host holds at most %d", n, pageLimit)
	}
}
