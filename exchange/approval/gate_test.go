package approval

import (
	"context"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"

	"github.com/tidwall/gjson"
)

// TestStrip: the gateway's requestState and its inputResponses key go; the server's own
// answers, and every other member, stay as they were.
func TestStrip(t *testing.T) {
	for _, c := range []struct{ in, carried, want string }{
		{`{"name":"t","arguments":{"a":1},"requestState":"sg1.x","inputResponses":{"` + InputKey + `":{"action":"accept"}}}`, "", `{"name":"t","arguments":{"a":1}}`},
		{`{"name":"t","inputResponses":{"` + InputKey + `":{},"confirm":{"action":"accept"}},"requestState":"sg1.x"}`, "", `{"name":"t","inputResponses":{"confirm":{"action":"accept"}}}`},
		// A continuation's retry: the server's own state goes back, its inputResponses untouched.
		{`{"name":"t","requestState":"sgc1.x","inputResponses":{"confirm":{"action":"accept"}}}`, `S"\`, `{"name":"t","inputResponses":{"confirm":{"action":"accept"}},"requestState":"S\"\\"}`},
		{`{"requestState":"sgc1.x"}`, "S", `{"requestState":"S"}`},
		{`{"requestState":"sg1.x"}`, "", `{}`},
		{`{"name":"t","inputResponses":7}`, "", `{"name":"t","inputResponses":7}`},
	} {
		got, ok := Strip(gjson.Parse(c.in), c.carried)
		if !ok || string(got) != c.want {
			t.Errorf("Strip(%s) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
	if _, ok := Strip(gjson.Parse(`[1]`), ""); ok {
		t.Error("Strip of an array: ok")
	}
}

// TestDecide_operatorWithoutHold: on a host that cannot hold a call (no Hold), an
// operator's approval is refused APPROVAL_REQUIRED with a message saying an operator must
// approve it and where that can happen; nothing is asked of the client.
func TestDecide_operatorWithoutHold(t *testing.T) {
	g := &Gate{}
	out := g.Decide(context.Background(), Need{By: "operator"}, &Call{Tool: "files.delete", Modern: true})
	if out.Verdict != Refuse || out.Code != abi.DenyApprovalRequired {
		t.Fatalf("Decide = %+v", out)
	}
	text := gjson.GetBytes(out.Result, "content.0.text").Str
	if !strings.Contains(text, "only after an operator approves") || !strings.Contains(text, "stategate serve") {
		t.Fatalf("the refusal says %q", text)
	}
}
