package approval

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stategate/stategate/internal/termsafe"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

func TestForm(t *testing.T) {
	f := Form("delete_file", []byte(`{ "path": "/etc/passwd" }`), "Allow the tool delete_file to run with the arguments shown?", 500)
	if jsonx.Validate(f, 64) != nil {
		t.Fatalf("Form is not JSON: %s", f)
	}
	want := `{"dev.stategate/approval":{"method":"elicitation/create","params":{"message":"Allow the tool delete_file to run with the arguments shown?\n\nTool: delete_file\nArguments: {\"path\":\"/etc/passwd\"}","requestedSchema":{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve this call","description":"Run the tool with exactly these arguments, once.","default":false}},"required":["approve"]}}}}`
	if string(f) != want {
		t.Fatalf("Form =\n%s\nwant\n%s", f, want)
	}
	if p := Params("delete_file", []byte(`{"path":"/etc/passwd"}`), "Allow the tool delete_file to run with the arguments shown?", 500); !strings.Contains(string(f), string(p)) {
		t.Errorf("Form does not carry Params:\n%s", p)
	}
}

// TestForm_hostileText: whatever the tool name, the arguments and the message hold, the
// text a person reads has no raw control, bidi or invisible character and stays short.
func TestForm_hostileText(t *testing.T) {
	cases := []struct {
		name, tool, args, message string
	}{
		{"escape sequences", "rm\x1b[2J\x1b]0;pwned\x07", `{"path":"\u001b[31mok\u001b[0m"}`, "ok"},
		{"bidi override", "pay\u202egnp.exe", `{"to":"\u202ecilA\u202c","amount":1}`, "Pay?"},
		{"invisible characters", "delete\u200b_file", `{"path":"/tmp/\ufeffx\u2066y"}`, "m\u2028n"},
		{"C1 and DEL", "x\u009by\x7f", `{"a":"\u0085\u009b"}`, "q"},
		{"line breaks that fake a form", "t", `{"note":"\n\nTool: harmless\nArguments: {}"}`, "ok"},
		{"invalid UTF-8", "to\xffol", "{\"a\":\"\xfe\"}", "m"},
		{"not JSON", "t", `{"a":`, "m"},
		{"long", strings.Repeat("n", 1000), `{"a":"` + strings.Repeat("é", 5000) + `"}`, "m"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := Form(c.tool, []byte(c.args), c.message, 300)
			if jsonx.Validate(f, 64) != nil {
				t.Fatalf("Form is not JSON: %q", f)
			}
			text := gjson.GetBytes(f, `dev\.stategate/approval.params.message`).Str
			lines := strings.Split(text, "\n")
			if len(lines) != 4 || lines[1] != "" || !strings.HasPrefix(lines[2], "Tool: ") || !strings.HasPrefix(lines[3], "Arguments: ") {
				t.Fatalf("the text has other lines than message, blank, Tool, Arguments: %q", text)
			}
			for _, r := range strings.Join(lines, "") {
				if termsafe.Control(r) || r == utf8.RuneError {
					t.Fatalf("raw %U in %q", r, text)
				}
			}
			if len(lines[2]) > len("Tool: ")+MaxToolShown+40 || len(lines[3]) > len("Arguments: ")+300+40 {
				t.Fatalf("not cut: %d and %d bytes", len(lines[2]), len(lines[3]))
			}
		})
	}
}

func TestReadAnswer(t *testing.T) {
	cases := []struct {
		in   string
		want Answer
	}{
		{`{"dev.stategate/approval":{"action":"accept","content":{"approve":true}}}`, Accept},
		{`{"other":{"action":"accept"},"dev.stategate/approval":{"action":"accept","content":{"approve":true}}}`, Accept},
		{`{"dev.stategate/approval":{"action":"accept","content":{"approve":false}}}`, Decline},
		{`{"dev.stategate/approval":{"action":"accept","content":{"approve":"true"}}}`, Decline},
		{`{"dev.stategate/approval":{"action":"accept","content":{"approve":1}}}`, Decline},
		{`{"dev.stategate/approval":{"action":"accept","content":{}}}`, Decline},
		{`{"dev.stategate/approval":{"action":"accept"}}`, Decline},
		{`{"dev.stategate/approval":{"action":"decline"}}`, Decline},
		{`{"dev.stategate/approval":{"action":"cancel"}}`, Cancel},
		{`{"dev.stategate/approval":{"action":"ACCEPT","content":{"approve":true}}}`, Invalid},
		{`{"dev.stategate/approval":{"content":{"approve":true}}}`, Invalid},
		{`{"dev.stategate/approval":"accept"}`, Invalid},
		{`{"stategate.approval":{"action":"accept","content":{"approve":true}}}`, Invalid},
		{`{}`, Invalid},
		{``, Invalid},
		{`[{"action":"accept"}]`, Invalid},
		{`{"dev.stategate/approval":{"action":"accept","content":{"approve":true}}`, Invalid},
		// Repeated members: readers could disagree on which one counts.
		{`{"dev.stategate/approval":{"action":"decline"},"dev.stategate/approval":{"action":"accept","content":{"approve":true}}}`, Invalid},
		{`{"dev.stategate/approval":{"action":"decline","action":"accept","content":{"approve":true}}}`, Invalid},
		{`{"dev.stategate/approval":{"action":"accept","content":{"approve":false,"approve":true}}}`, Invalid},
		{`{"dev.stategate/approval":{"action":"accept","content":{"approve":true},"content":{"approve":false}}}`, Invalid},
		// An escaped key is the same key.
		{`{"dev.stategate\/approval":{"action":"accept","content":{"\u0061pprove":true}}}`, Accept},
	}
	for _, c := range cases {
		if got := ReadAnswer([]byte(c.in)); got != c.want {
			t.Errorf("ReadAnswer(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
