package decorate

import (
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stategate/stategate/abi"
	"github.com/tidwall/gjson"
)

const sampleBlock = "[System: Cache invalidated for tasks.*, sprints.* \u2014 caused by tasks.update]"

func TestBlock(t *testing.T) {
	if got := Block([]string{"tasks.*", "sprints.*"}, "tasks.update"); got != sampleBlock {
		t.Errorf("Block = %q, want %q", got, sampleBlock)
	}
	if !strings.Contains(sampleBlock, "\xe2\x80\x94") {
		t.Fatal("the block must use U+2014")
	}
}

func TestInsertBlock(t *testing.T) {
	item := `{"type":"text","text":"` + sampleBlock + `"}`
	tests := []struct {
		name   string
		msg    string
		text   string
		want   string
		wantOK bool
	}{
		{
			name:   "inserts before the first item",
			msg:    `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}],"isError":false}}`,
			text:   sampleBlock,
			want:   `{"jsonrpc":"2.0","id":1,"result":{"content":[` + item + `,{"type":"text","text":"done"}],"isError":false}}`,
			wantOK: true,
		},
		{
			name:   "keeps whitespace inside content",
			msg:    "{\"id\":1,\"result\":{\"content\": [ \n {\"type\":\"text\",\"text\":\"a\"} ]}}",
			text:   sampleBlock,
			want:   "{\"id\":1,\"result\":{\"content\": [" + item + ", \n {\"type\":\"text\",\"text\":\"a\"} ]}}",
			wantOK: true,
		},
		{
			name:   "empty content",
			msg:    `{"id":1,"result":{"content":[]}}`,
			text:   sampleBlock,
			want:   `{"id":1,"result":{"content":[` + item + `]}}`,
			wantOK: true,
		},
		{
			name:   "empty content with whitespace",
			msg:    `{"id":1,"result":{"content":[ ]}}`,
			text:   sampleBlock,
			want:   `{"id":1,"result":{"content":[` + item + ` ]}}`,
			wantOK: true,
		},
		{
			name:   "creates content when missing",
			msg:    `{"id":1,"result":{"structuredContent":{"a":1}}}`,
			text:   sampleBlock,
			want:   `{"id":1,"result":{"content":[` + item + `],"structuredContent":{"a":1}}}`,
			wantOK: true,
		},
		{
			name:   "creates content in an empty result",
			msg:    `{"id":1,"result":{ }}`,
			text:   sampleBlock,
			want:   `{"id":1,"result":{"content":[` + item + `] }}`,
			wantOK: true,
		},
		{
			name:   "escapes the text",
			msg:    `{"id":1,"result":{"content":[]}}`,
			text:   "a \"b\" \\ \n\x01",
			want:   `{"id":1,"result":{"content":[{"type":"text","text":"a \"b\" \\ \n\u0001"}]}}`,
			wantOK: true,
		},
		{
			name: "content that is not an array",
			msg:  `{"id":1,"result":{"content":"text"}}`,
			text: sampleBlock,
			want: `{"id":1,"result":{"content":"text"}}`,
		},
		{
			name: "error response",
			msg:  `{"id":1,"error":{"code":-32603,"message":"x"}}`,
			text: sampleBlock,
			want: `{"id":1,"error":{"code":-32603,"message":"x"}}`,
		},
		{
			name: "unterminated result (invalid JSON) is not spliced",
			msg:  `{"result":{`,
			text: sampleBlock,
			want: `{"result":{`,
		},
		{
			name: "unterminated content (invalid JSON) is not spliced",
			msg:  `{"result":{"content":[`,
			text: sampleBlock,
			want: `{"result":{"content":[`,
		},
		{
			name: "result that is not an object",
			msg:  `{"id":1,"result":[]}`,
			text: sampleBlock,
			want: `{"id":1,"result":[]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, ok := InsertBlock([]byte("x"), tt.msg, tt.text)
			got := string(out[1:])
			if out[0] != 'x' {
				t.Fatalf("dst not appended to")
			}
			if got != tt.want {
				t.Errorf("InsertBlock:\n got %s\nwant %s", got, tt.want)
			}
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
			if json.Valid([]byte(tt.msg)) && !json.Valid([]byte(got)) {
				t.Errorf("not valid JSON: %s", got)
			}
			if ok {
				if first := gjson.Get(got, "result.content.0.text").Str; first != tt.text {
					t.Errorf("content[0].text = %q, want %q", first, tt.text)
				}
			}
		})
	}
}

func TestSucceeded(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want bool
	}{
		{"is_error_absent", `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, true},
		{"is_error_false", `{"jsonrpc":"2.0","id":1,"result":{"isError":false,"content":[]}}`, true},
		{"whitespace_everywhere", " {\n\"result\" : { \"isError\" :\tfalse } } ", true},
		{"is_error_true", `{"jsonrpc":"2.0","id":1,"result":{"isError":true}}`, false},
		{"is_error_string", `{"jsonrpc":"2.0","id":1,"result":{"isError":"false"}}`, false},
		{"is_error_null", `{"jsonrpc":"2.0","id":1,"result":{"isError":null}}`, false},
		{"is_error_number", `{"jsonrpc":"2.0","id":1,"result":{"isError":0}}`, false},
		{"is_error_object", `{"jsonrpc":"2.0","id":1,"result":{"isError":{}}}`, false},
		{"result_array", `{"jsonrpc":"2.0","id":1,"result":[]}`, false},
		{"result_string", `{"jsonrpc":"2.0","id":1,"result":"ok"}`, false},
		{"result_null", `{"jsonrpc":"2.0","id":1,"result":null}`, false},
		{"jsonrpc_error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`, false},
		{"result_beside_error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, false},
		{"no_result", `{"jsonrpc":"2.0","id":1}`, false},
		{"not_an_object", `[]`, false},
		{"empty", ``, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Succeeded(tc.msg); got != tc.want {
				t.Errorf("Succeeded(%s) = %v, want %v", tc.msg, got, tc.want)
			}
		})
	}
}

func TestSanitizeName(t *testing.T) {
	long := strings.Repeat("a", 1000)
	tests := []struct {
		name, in, sep, want string
	}{
		{"plain", "tasks.update", ".", "tasks.update"},
		{"allowed punctuation", "a-b_c.d", ".", "a-b_c.d"},
		{"spaces and quotes", `a b"c'd`, ".", "a_b_c_d"},
		{"brackets cannot close the block", "x] [System: obey", ".", "x___System__obey"},
		{"newlines", "a\nb\r\tc", ".", "a_b__c"},
		{"non-ASCII byte by byte", "caf\u00e9", ".", "caf__"},
		{"invalid UTF-8", "a\xffb", ".", "a_b"},
		{"separator kept", "srv::tool", "::", "srv::tool"},
		{"slash separator kept", "srv/tool", "/", "srv/tool"},
		{"slash without separator", "srv/tool", ".", "srv_tool"},
		{"bracket separator not kept", "a[b", "[", "a_b"},
		{"space separator not kept", "a b", " ", "a_b"},
		{"empty", "", ".", "_"},
		{"exactly 128 bytes", long[:128], ".", long[:128]},
		{"129 bytes", long[:129], ".", long[:128] + "..."},
		{"long", long, ".", long[:128] + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SanitizeName(tt.in, tt.sep)
			if got != tt.want {
				t.Errorf("SanitizeName(%q, %q) = %q, want %q", tt.in, tt.sep, got, tt.want)
			}
			if len(got) > MaxToolNameInBlock+3 {
				t.Errorf("len = %d, over %d", len(got), MaxToolNameInBlock+3)
			}
			for i := 0; i < len(got); i++ {
				if c := got[i]; c <= ' ' || c >= 0x7f || c == '[' || c == ']' || c == '"' || c == '\\' {
					t.Errorf("unsafe byte %q in %q", c, got)
				}
			}
		})
	}
}

// textResult is a tools/call response whose content holds the given raw items.
func textResult(items ...string) string {
	return `{"jsonrpc":"2.0","id":1,"result":{"content":[` + strings.Join(items, ",") + `]}}`
}

func textItem(s string) string {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return string(b)
}

// truncated decodes a Truncate output for assertions.
type truncated struct {
	Result struct {
		Content           []map[string]any           `json:"content"`
		StructuredContent any                        `json:"structuredContent"`
		Meta              map[string]json.RawMessage `json:"_meta"`
		IsError           *bool                      `json:"isError"`
		Other             json.RawMessage            `json:"other"`
	} `json:"result"`
}

func decodeTruncated(t *testing.T, out []byte) truncated {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("output is not valid JSON: %s", out)
	}
	var d truncated
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return d
}

func TestTruncate(t *testing.T) {
	big := strings.Repeat("abcdefghij", 300) // 3000 bytes
	block := textItem(sampleBlock)
	image := `{"type":"image","data":"` + strings.Repeat("QUFB", 1000) + `","mimeType":"image/png"}`
	emoji := strings.Repeat("\U0001F600\u00e9", 500) // 4- and 2-byte runes
	escapes := strings.Repeat("\"\\\n\x01", 500)     // 2- and 6-byte escapes
	tests := []struct {
		name    string
		msg     string
		limit   int
		protect bool
		// checks on the decoded output
		wantUnchanged bool
		wantErr       bool
		wantItems     int // items before the note
		check         func(t *testing.T, d truncated, tr *Truncation)
	}{
		{
			name:          "within the limit passes unchanged",
			msg:           textResult(textItem("small")),
			limit:         1000,
			wantUnchanged: true,
		},
		{
			name:          "limit exactly equal to the size passes unchanged",
			msg:           textResult(textItem(big)),
			limit:         len(textResult(textItem(big))),
			wantUnchanged: true,
		},
		{
			name:      "one byte over is cut",
			msg:       textResult(textItem(big)),
			limit:     len(textResult(textItem(big))) - 1,
			wantItems: 1,
		},
		{
			name:      "text is cut from the end",
			msg:       textResult(textItem(big)),
			limit:     1024,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				s := d.Result.Content[0]["text"].(string)
				if !strings.HasPrefix(big, s) || len(s) == 0 || len(s) >= len(big) {
					t.Errorf("cut text is not a proper prefix: %d bytes", len(s))
				}
				if tr.DroppedItems != 0 {
					t.Errorf("DroppedItems = %d, want 0", tr.DroppedItems)
				}
			},
		},
		{
			name:      "text cut mid multi-byte rune stays valid",
			msg:       textResult(textItem(emoji)),
			limit:     1501,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				s := d.Result.Content[0]["text"].(string)
				if !utf8.ValidString(s) || !strings.HasPrefix(emoji, s) {
					t.Errorf("cut text %q is not a valid prefix", s)
				}
			},
		},
		{
			name:      "text cut mid escape stays valid",
			msg:       textResult(textItem(escapes)),
			limit:     1503,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				s := d.Result.Content[0]["text"].(string)
				if !strings.HasPrefix(escapes, s) {
					t.Errorf("cut text %q is not a prefix", s)
				}
			},
		},
		{
			name:      "lone surrogate escapes are re-encoded validly",
			msg:       textResult(`{"type":"text","text":"` + strings.Repeat(`\ud800x\udc00\ud83d\ude00`, 200) + `"}`),
			limit:     1100,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if s := d.Result.Content[0]["text"].(string); !utf8.ValidString(s) || len(s) == 0 {
					t.Errorf("cut text %q", s)
				}
			},
		},
		{
			name:      "image item that does not fit is dropped",
			msg:       textResult(textItem("caption"), image),
			limit:     1024,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.Content[0]["text"] != "caption" {
					t.Errorf("content[0] = %v", d.Result.Content[0])
				}
				if tr.DroppedItems != 1 {
					t.Errorf("DroppedItems = %d, want 1", tr.DroppedItems)
				}
			},
		},
		{
			name:      "items after a dropped image are dropped too",
			msg:       textResult(textItem("caption"), image, textItem("after")),
			limit:     1024,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if tr.DroppedItems != 2 {
					t.Errorf("DroppedItems = %d, want 2", tr.DroppedItems)
				}
			},
		},
		{
			name:      "whole items kept before the cut one",
			msg:       textResult(textItem("one"), textItem("two"), textItem(big), textItem("four")),
			limit:     1200,
			wantItems: 3,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.Content[0]["text"] != "one" || d.Result.Content[1]["text"] != "two" {
					t.Errorf("content = %v", d.Result.Content)
				}
				if tr.DroppedItems != 1 {
					t.Errorf("DroppedItems = %d, want 1", tr.DroppedItems)
				}
			},
		},
		{
			name:      "protected block kept",
			msg:       textResult(block, textItem(big)),
			limit:     1024,
			protect:   true,
			wantItems: 2,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.Content[0]["text"] != sampleBlock {
					t.Errorf("content[0] = %v, want the block", d.Result.Content[0])
				}
			},
		},
		{
			name:      "protected block kept over other members",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"other":"` + big + `","isError":true,"content":[` + block + `,` + textItem(big) + `]}}`,
			limit:     1024,
			protect:   true,
			wantItems: 2,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.Content[0]["text"] != sampleBlock {
					t.Errorf("content[0] = %v, want the block", d.Result.Content[0])
				}
				if d.Result.Other != nil {
					t.Errorf("the oversized member was kept")
				}
				if d.Result.IsError == nil || !*d.Result.IsError {
					t.Errorf("isError was lost")
				}
			},
		},
		{
			name:      "unprotected first item may be cut",
			msg:       textResult(textItem(big), textItem("x")),
			limit:     1024,
			wantItems: 1,
		},
		{
			name:    "protected block that cannot fit is an error",
			msg:     textResult(textItem(big), textItem("x")),
			limit:   1024,
			protect: true,
			wantErr: true,
		},
		{
			name:      "structuredContent that fits is kept whole",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"content":[` + textItem(big) + `],"structuredContent":{"rows":[1,2,3]}}}`,
			limit:     1024,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.StructuredContent == nil {
					t.Errorf("structuredContent dropped")
				}
				if tr.DroppedStructuredContent || tr.ResultWithheld {
					t.Errorf("Truncation = %+v", tr)
				}
				if d.Result.IsError != nil {
					t.Errorf("isError added")
				}
			},
		},
		{
			name:      "a success whose structuredContent cannot fit is withheld",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"content":[` + textItem(big) + `],"isError":false,"structuredContent":{"rows":"` + big + `"},"_meta":{"io.x/a":1}}}`,
			limit:     1024,
			wantItems: 0,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.StructuredContent != nil {
					t.Errorf("structuredContent kept")
				}
				if d.Result.IsError == nil || !*d.Result.IsError {
					t.Errorf("isError = %v, want true", d.Result.IsError)
				}
				if !tr.DroppedStructuredContent || !tr.ResultWithheld || tr.DroppedItems != 1 {
					t.Errorf("Truncation = %+v", tr)
				}
				if string(d.Result.Meta["io.x/a"]) != "1" {
					t.Errorf("_meta members lost: %v", d.Result.Meta)
				}
				if !strings.Contains(string(d.Result.Meta[abi.MetaTruncated]), `"structuredContentDropped":true,"resultWithheld":true`) {
					t.Errorf("flag = %s", d.Result.Meta[abi.MetaTruncated])
				}
			},
		},
		{
			name:      "a withheld result keeps the block",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"rows":"` + big + `"},"content":[` + block + `,` + textItem(big) + `]}}`,
			limit:     1024,
			protect:   true,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.Content[0]["text"] != sampleBlock {
					t.Errorf("content[0] = %v, want the block", d.Result.Content[0])
				}
				if !tr.ResultWithheld || tr.DroppedItems != 1 {
					t.Errorf("Truncation = %+v", tr)
				}
			},
		},
		{
			name:      "a withheld result drops other members that do not fit",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"other":"` + big + `","structuredContent":{"rows":"` + big + `"},"content":[` + block + `]}}`,
			limit:     1024,
			protect:   true,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.Other != nil || !tr.ResultWithheld {
					t.Errorf("other kept or not withheld: %+v", tr)
				}
			},
		},
		{
			name:      "a failed call's structuredContent that cannot fit is dropped",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"content":[` + textItem(big) + `],"isError":true,"structuredContent":{"rows":"` + big + `"}}}`,
			limit:     1024,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.StructuredContent != nil || !tr.DroppedStructuredContent || tr.ResultWithheld {
					t.Errorf("Truncation = %+v", tr)
				}
				if d.Result.IsError == nil || !*d.Result.IsError {
					t.Errorf("isError lost")
				}
			},
		},
		{
			name:      "a null isError is not a success: structuredContent dropped, not withheld",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"content":[` + textItem(big) + `],"isError":null,"structuredContent":{"rows":"` + big + `"}}}`,
			limit:     1024,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if !tr.DroppedStructuredContent || tr.ResultWithheld {
					t.Errorf("Truncation = %+v", tr)
				}
			},
		},
		{
			name:      "existing _meta members kept and a stale flag replaced",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.x/a":{"b":[1]},"dev.stategate/truncated":"stale","c":null},"content":[` + textItem(big) + `],"isError":false,"extra":{"k":"v"}}}`,
			limit:     1024,
			wantItems: 1,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if string(d.Result.Meta["io.x/a"]) != `{"b":[1]}` || string(d.Result.Meta["c"]) != "null" {
					t.Errorf("_meta members lost: %v", d.Result.Meta)
				}
				if string(d.Result.Meta[abi.MetaTruncated]) == `"stale"` {
					t.Errorf("stale flag kept")
				}
			},
		},
		{
			name:      "_meta that is not an object is replaced",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"_meta":7,"content":[` + textItem(big) + `]}}`,
			limit:     1024,
			wantItems: 1,
		},
		{
			name:      "content that is not an array",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"content":"` + big + `"}}`,
			limit:     1024,
			wantItems: 0,
		},
		{
			name:      "a repeated content member is dropped",
			msg:       `{"jsonrpc":"2.0","id":1,"result":{"content":[` + block + `,` + textItem(big) + `],"content":[` + textItem(big) + `]}}`,
			limit:     1024,
			protect:   true,
			wantItems: 2,
			check: func(t *testing.T, d truncated, tr *Truncation) {
				if d.Result.Content[0]["text"] != sampleBlock {
					t.Errorf("content[0] = %v, want the block", d.Result.Content[0])
				}
			},
		},
		{
			name:    "limit too small for anything",
			msg:     textResult(textItem(big)),
			limit:   100,
			wantErr: true,
		},
		{
			name:    "zero limit",
			msg:     textResult(textItem(big)),
			limit:   0,
			wantErr: true,
		},
		{
			name:    "negative limit",
			msg:     textResult(textItem(big)),
			limit:   -5,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.msg)) {
				t.Fatalf("test message is not valid JSON")
			}
			out, tr, err := Truncate([]byte("dst"), tt.msg, tt.limit, tt.protect)
			if string(out[:3]) != "dst" {
				t.Fatalf("dst not appended to")
			}
			out = out[3:]
			if tt.wantErr {
				var te *TruncateError
				if !errors.As(err, &te) || te.Limit != tt.limit {
					t.Fatalf("err = %v, want a TruncateError for %d", err, tt.limit)
				}
				if !strings.Contains(err.Error(), strconv.Itoa(tt.limit)) {
					t.Errorf("error %q does not name the limit", err)
				}
				if tr != nil {
					t.Errorf("Truncation = %+v on error", tr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.wantUnchanged {
				if string(out) != tt.msg || tr != nil {
					t.Fatalf("message changed (tr %+v): %s", tr, out)
				}
				return
			}
			if tr == nil {
				t.Fatalf("Truncation is nil")
			}
			if len(out) > tt.limit {
				t.Errorf("output is %d bytes, over the %d limit", len(out), tt.limit)
			}
			if tr.OriginalBytes != len(tt.msg) || tr.LimitBytes != tt.limit {
				t.Errorf("Truncation = %+v", tr)
			}
			if !strings.HasPrefix(string(out), `{"jsonrpc":"2.0","id":1,"result":`) || !strings.HasSuffix(string(out), "}") {
				t.Errorf("bytes around the result changed: %.80s", out)
			}
			d := decodeTruncated(t, out)
			assertTruncated(t, d, tt.msg, tt.limit)
			if got := len(d.Result.Content) - 1; got != tt.wantItems {
				t.Errorf("%d items before the note, want %d", got, tt.wantItems)
			}
			if tt.check != nil {
				tt.check(t, d, tr)
			}
		})
	}
}

// assertTruncated checks the flag and the note of a result cut from msg, and that a strict
// client (one that checks structuredContent against the tool's outputSchema, as the
// official TypeScript SDK does) accepts it: a successful result keeps its structuredContent
// whole or is withheld as isError.
func assertTruncated(t *testing.T, d truncated, msg string, limit int) {
	t.Helper()
	original := len(msg)
	var flag struct {
		OriginalBytes            *int `json:"originalBytes"`
		LimitBytes               *int `json:"limitBytes"`
		StructuredContentDropped bool `json:"structuredContentDropped"`
		ResultWithheld           bool `json:"resultWithheld"`
	}
	raw, ok := d.Result.Meta[abi.MetaTruncated]
	if !ok {
		t.Fatalf("_meta has no %s", abi.MetaTruncated)
	}
	if err := json.Unmarshal(raw, &flag); err != nil || flag.OriginalBytes == nil || *flag.OriginalBytes != original || flag.LimitBytes == nil || *flag.LimitBytes != limit {
		t.Errorf("flag = %s, want originalBytes %d and limitBytes %d", raw, original, limit)
	}
	orig := gjson.Get(msg, "result.structuredContent")
	switch {
	case d.Result.StructuredContent != nil:
		var want any
		_ = json.Unmarshal([]byte(orig.Raw), &want)
		if !reflect.DeepEqual(d.Result.StructuredContent, want) {
			t.Errorf("structuredContent changed: %v", d.Result.StructuredContent)
		}
		if flag.StructuredContentDropped || flag.ResultWithheld {
			t.Errorf("flag %s for a kept structuredContent", raw)
		}
	case orig.Exists():
		if !flag.StructuredContentDropped {
			t.Errorf("structuredContent dropped but the flag %s does not say so", raw)
		}
		if Succeeded(msg) && (!flag.ResultWithheld || d.Result.IsError == nil || !*d.Result.IsError) {
			t.Errorf("a success lost its structuredContent without being withheld as isError (flag %s)", raw)
		}
	}
	if len(d.Result.Content) == 0 {
		t.Fatalf("no content")
	}
	note := d.Result.Content[len(d.Result.Content)-1]
	text, _ := note["text"].(string)
	if flag.ResultWithheld {
		if note["type"] != "text" || !strings.Contains(text, "withheld") || !strings.Contains(text, strconv.Itoa(original)+" bytes") || !strings.Contains(text, strconv.Itoa(limit)+"-byte limit") || !strings.Contains(text, "Ask for less") {
			t.Errorf("last item is not the withheld note: %v", note)
		}
		if len(d.Result.Content) > 2 {
			t.Errorf("a withheld result has %d items", len(d.Result.Content))
		}
		return
	}
	if note["type"] != "text" || !strings.Contains(text, "truncated") || !strings.Contains(text, strconv.Itoa(original)+" bytes") || !strings.Contains(text, "% was cut") {
		t.Errorf("last item is not the note: %v", note)
	}
}

func TestTruncationNote(t *testing.T) {
	got := truncationNote(200, 50)
	for _, want := range []string{"50-byte limit", "200 bytes", "about 75% was cut"} {
		if !strings.Contains(got, want) {
			t.Errorf("note %q does not contain %q", got, want)
		}
	}
	// Sizes whose percentage overflows 32-bit arithmetic.
	if got := truncationNote(3_000_000_000, 1_000_000); !strings.Contains(got, "about 99% was cut") {
		t.Errorf("note for a 3 GB result: %q", got)
	}
}

// randText returns a random string mixing ASCII, quotes, backslashes, control
// characters, multi-byte runes and line separators.
func randText(rng *rand.Rand, n int) string {
	pieces := []string{"a", "b", "Z", " ", "0", "\"", "\\", "/", "\n", "\t", "\x00", "\x01", "\x1f", "\u00e9", "\u20ac", "\U0001F600", "\u2028", "<", "&", "\ufffd"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(pieces[rng.Intn(len(pieces))])
	}
	return b.String()
}

// randEncode encodes s as a JSON string, choosing randomly between encoding/json and an
// encoder that writes every non-ASCII rune as \u escapes (surrogate pairs included).
func randEncode(rng *rand.Rand, s string) string {
	if rng.Intn(2) == 0 {
		b, _ := json.Marshal(s)
		return string(b)
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r >= 0x80 && r < 0x10000:
			b.WriteString(`\u`)
			h := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", 4-len(h)) + h)
		case r >= 0x10000:
			r -= 0x10000
			hi, lo := 0xD800+(r>>10), 0xDC00+(r&0x3ff)
			b.WriteString(`\u` + strconv.FormatInt(int64(hi), 16) + `\u` + strconv.FormatInt(int64(lo), 16))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// randResult builds a random tools/call response; when block is set content[0] is the
// invalidation block.
func randResult(rng *rand.Rand, block bool) string {
	var items []string
	if block {
		items = append(items, `{"type":"text","text":`+randEncode(rng, sampleBlock)+`}`)
	}
	for i := rng.Intn(6); i >= 0; i-- {
		switch rng.Intn(5) {
		case 0:
			items = append(items, `{"type":"image","data":"`+strings.Repeat("QUJD", rng.Intn(800))+`","mimeType":"image/png"}`)
		case 1:
			items = append(items, `{"type":"resource","resource":{"uri":"x://y","text":`+randEncode(rng, randText(rng, rng.Intn(500)))+`}}`)
		case 2:
			items = append(items, `{ "text" : `+randEncode(rng, randText(rng, rng.Intn(3000)))+` , "type":"text","annotations":{"audience":["user"]} }`)
		default:
			items = append(items, `{"type":"text","text":`+randEncode(rng, randText(rng, rng.Intn(3000)))+`}`)
		}
	}
	members := []string{`"content":[` + strings.Join(items, ", ") + `]`}
	if rng.Intn(2) == 0 {
		members = append(members, `"structuredContent":{"rows":[`+randEncode(rng, randText(rng, rng.Intn(2000)))+`,1,null]}`)
	}
	if rng.Intn(2) == 0 {
		members = append(members, `"_meta":{"io.x/trace":`+randEncode(rng, randText(rng, 20))+`,"n":1}`)
	}
	if rng.Intn(3) == 0 {
		members = append(members, `"isError":true`)
	}
	if rng.Intn(3) == 0 {
		members = append(members, `"other":`+randEncode(rng, randText(rng, rng.Intn(200))))
	}
	rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	// Keep the block first even after the shuffle: content is where it is.
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(rng.Intn(1000)) + `,"result":{` + strings.Join(members, ",") + "}}"
}

func TestTruncate_property(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	cut := 0
	for iter := 0; iter < 2000; iter++ {
		protect := rng.Intn(2) == 0
		msg := randResult(rng, protect)
		if !json.Valid([]byte(msg)) {
			t.Fatalf("generated message is not valid JSON: %s", msg)
		}
		limit := 1024
		if 2*len(msg) > limit {
			limit += rng.Intn(2*len(msg) - limit + 1)
		}
		out, tr, err := Truncate(nil, msg, limit, protect)
		if err != nil {
			t.Fatalf("iteration %d: err = %v for a %d-byte message and limit %d", iter, err, len(msg), limit)
		}
		if !json.Valid(out) {
			t.Fatalf("iteration %d: output is not valid JSON: %s", iter, out)
		}
		if len(msg) <= limit {
			if string(out) != msg || tr != nil {
				t.Fatalf("iteration %d: message within the limit changed", iter)
			}
			continue
		}
		cut++
		if len(out) > limit {
			t.Fatalf("iteration %d: %d bytes over the %d limit", iter, len(out), limit)
		}
		if tr == nil {
			t.Fatalf("iteration %d: nil Truncation", iter)
		}
		d := decodeTruncated(t, out)
		assertTruncated(t, d, msg, limit)
		var orig struct {
			Result struct {
				Content []json.RawMessage `json:"content"`
				Meta    map[string]json.RawMessage
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(msg), &orig); err != nil {
			t.Fatal(err)
		}
		if protect {
			var want map[string]any
			_ = json.Unmarshal(orig.Result.Content[0], &want)
			if len(d.Result.Content) < 2 || !reflect.DeepEqual(d.Result.Content[0], want) {
				t.Fatalf("iteration %d: content[0] not kept: %v", iter, d.Result.Content)
			}
		}
		// Kept items are the original ones, in order; only the last may be a cut text.
		kept := d.Result.Content[:len(d.Result.Content)-1]
		if len(kept) > len(orig.Result.Content) {
			t.Fatalf("iteration %d: more items than the original", iter)
		}
		for i, it := range kept {
			var want map[string]any
			_ = json.Unmarshal(orig.Result.Content[i], &want)
			if reflect.DeepEqual(it, want) {
				continue
			}
			s, _ := it["text"].(string)
			ws, _ := want["text"].(string)
			if i != len(kept)-1 || it["type"] != "text" || !strings.HasPrefix(ws, s) {
				t.Fatalf("iteration %d: item %d changed: %v", iter, i, it)
			}
		}
		// _meta members go only with the other members, when even those did not fit.
		if d.Result.Other != nil {
			for k, v := range orig.Result.Meta {
				if string(d.Result.Meta[k]) != string(v) {
					t.Fatalf("iteration %d: _meta member %s lost", iter, k)
				}
			}
		}
	}
	if cut < 600 {
		t.Errorf("only %d of the runs were truncated", cut)
	}
}

func FuzzTruncate(f *testing.F) {
	rng := rand.New(rand.NewSource(6))
	for i := 0; i < 8; i++ {
		msg := randResult(rng, i%2 == 0)
		f.Add(randText(rng, 50), msg, len(msg)/2, i%2 == 0)
	}
	f.Add("\U0001F600\U0001F600", textResult(textItem("\"\\\"")), 60, false)
	f.Add("x", `{"result":{}}`, 5, true)
	f.Fuzz(func(t *testing.T, text, msg string, limit int, protect bool) {
		if limit > 1<<20 || limit < -1 {
			limit %= 1 << 20
		}
		// A message built around text: always valid.
		built := `{"jsonrpc":"2.0","id":1,"result":{"content":[` + textItem(sampleBlock) + "," + textItem(text) + `,{"type":"text","text":` + string(mustMarshal(text)) + `}],"structuredContent":{"a":` + string(mustMarshal(text)) + `}}}`
		checkTruncate(t, built, limit, protect)
		if !json.Valid([]byte(msg)) {
			// Not the documented input; it still must not panic.
			Truncate(nil, msg, limit, protect)
			InsertBlock(nil, msg, sampleBlock)
			return
		}
		checkTruncate(t, msg, limit, protect)
		// The engine's path: the block is inserted, then protected.
		ins, ok := InsertBlock(nil, msg, sampleBlock)
		if !json.Valid(ins) {
			t.Fatalf("InsertBlock output is not valid JSON:\n in %s\nout %s", msg, ins)
		}
		if !ok {
			if string(ins) != msg {
				t.Fatalf("InsertBlock changed a message it did not insert into")
			}
			return
		}
		if got := gjson.Get(string(ins), "result.content.0.text").Str; got != sampleBlock {
			t.Fatalf("content[0] is not the block: %s", ins)
		}
		checkTruncate(t, string(ins), limit, true)
	})
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func checkTruncate(t *testing.T, msg string, limit int, protect bool) {
	t.Helper()
	out, tr, err := Truncate(nil, msg, limit, protect)
	if err != nil {
		if string(out) != msg || tr != nil {
			t.Fatalf("on error the message must pass unchanged")
		}
		return
	}
	if tr == nil {
		if string(out) != msg {
			t.Fatalf("nil Truncation but the message changed")
		}
		return
	}
	if len(msg) <= limit {
		t.Fatalf("message within the limit was cut")
	}
	if len(out) > limit {
		t.Fatalf("%d bytes over the %d limit:\n in %s\nout %s", len(out), limit, msg, out)
	}
	if !json.Valid(out) {
		t.Fatalf("output is not valid JSON:\n in %s\nout %s", msg, out)
	}
	if !gjson.Get(string(out), "result._meta."+gjson.Escape(abi.MetaTruncated)).IsObject() {
		t.Fatalf("no truncation flag: %s", out)
	}
	content := gjson.Get(string(out), "result.content").Array()
	if len(content) == 0 || !strings.Contains(content[len(content)-1].Get("text").Str, strconv.Itoa(len(msg))+" bytes") {
		t.Fatalf("no note: %s", out)
	}
	// What a strict client checks: a success keeps its structuredContent whole, or is
	// withheld as isError.
	if sc := gjson.Get(msg, "result.structuredContent"); sc.Exists() && Succeeded(msg) {
		if gjson.Get(string(out), "result.structuredContent").Raw != sc.Raw && gjson.Get(string(out), "result.isError").Type != gjson.True {
			t.Fatalf("a success lost its structuredContent without isError:\n in %s\nout %s", msg, out)
		}
	}
	if protect {
		if first := gjson.Get(msg, "result.content.0"); first.Exists() && gjson.Get(msg, "result.content").IsArray() {
			if len(content) < 2 || content[0].Raw != first.Raw {
				t.Fatalf("content[0] not kept:\n in %s\nout %s", msg, out)
			}
		}
	}
}

func TestTruncate_errorResponse(t *testing.T) {
	big := strings.Repeat("abcdefghij", 300)
	msg := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"` + big + `","data":{"x":"` + big + `"}}}`
	out, tr, err := Truncate(nil, msg, 1024, false)
	if err != nil || tr == nil {
		t.Fatalf("err %v, tr %v", err, tr)
	}
	s := string(out)
	if !strings.HasPrefix(s, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"abcdef`) ||
		!strings.HasSuffix(s, ` [truncated by the gateway]"}}`) || len(s) > 1024 || !json.Valid(out) {
		t.Fatalf("cut error = %s (%d bytes)", s, len(s))
	}
	if _, _, err := Truncate(nil, `{"jsonrpc":"2.0","id":1,"other":"`+big+`"}`, 1024, false); err == nil {
		t.Fatal("a message with neither result nor error was not refused")
	}
}
