package cli

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/host/ops"
)

func TestSelectionOf(t *testing.T) {
	for _, tc := range []struct {
		name, tool, positional string
		want                   Selection
	}{
		{name: "tool_flag_is_a_name_even_with_stars", tool: "a.*", want: Selection{tool: "a.*"}},
		{name: "positional_without_star_is_a_name", positional: "cart.pay", want: Selection{tool: "cart.pay"}},
		{name: "positional_with_star_is_a_glob", positional: "cart.*", want: Selection{match: "cart.*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SelectionOf(tc.tool, tc.positional); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestActOnTools_glob: a glob is previewed, confirmed, then acted on tool by tool by exact
// name, each approval with the definitions its preview showed; without a terminal and
// without --yes nothing is acted on.
func TestActOnTools_glob(t *testing.T) {
	preview := []health.ModeChange{
		{Name: "a.x", From: "quarantined", To: "active", OK: true, Pending: map[string]string{"a.x": "0123456789abcdef"}},
		{Name: "a.y", From: "quarantined", To: "active", OK: true},
	}
	var sent []string
	send := func(tg ops.Target, pending map[string]string) ([]health.ModeChange, error) {
		if tg.DryRun {
			sent = append(sent, "preview "+tg.Match)
			return preview, nil
		}
		sent = append(sent, tg.Tool+" pending="+strings.Join(keys(pending), ","))
		return []health.ModeChange{{Name: tg.Tool, OK: true}}, nil
	}
	var stderr strings.Builder
	_, err := actOnTools(Selection{match: "a.*"}, true, send, Confirmer{Stdin: strings.NewReader("y\n"), Stderr: &stderr})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || len(sent) != 1 {
		t.Fatalf("no terminal, no --yes: %v, sent %q", err, sent)
	}
	if !strings.Contains(stderr.String(), "a.* matches 2 tool(s)") || !strings.Contains(stderr.String(), "[pending: a.x sha256:0123456789ab]") {
		t.Fatalf("the preview shown:\n%s", stderr.String())
	}
	sent = nil
	changes, err := actOnTools(Selection{match: "a.*"}, true, send, Confirmer{Yes: true, Stderr: io.Discard})
	if err != nil || len(changes) != 2 || strings.Join(sent, "; ") != "preview a.*; a.x pending=a.x; a.y pending=" {
		t.Fatalf("--yes: %v %v, sent %q", changes, err, sent)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
