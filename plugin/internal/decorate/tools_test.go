package decorate

import (
	"encoding/json"
	"hash/fnv"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

const markPayment = "[Workflow checkout: available only in state payment]"

// decisions returns a decide function backed by a map; names not in the map get
// no-store, the sample configuration's default.
func decisions(m map[string]Decision) func(string, config.Class) Decision {
	return func(name string, _ config.Class) Decision {
		if d, ok := m[name]; ok {
			return d
		}
		return Decision{Cache: config.CacheNoStore}
	}
}

func wrapTools(tools string) string {
	return `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + tools + `]}}`
}

func TestTools(t *testing.T) {
	noStore := Decision{Cache: config.CacheNoStore}
	immutable := Decision{Cache: config.CacheImmutable}
	none := Decision{}
	tests := []struct {
		name       string
		msg        string
		decide     map[string]Decision
		want       string
		wantOK     bool
		wantNames  []string
		wantHidden []string
	}{
		{
			name:      "appends no-store tag",
			msg:       wrapTools(`{"name":"tasks.list","description":"List tasks"}`),
			decide:    map[string]Decision{"tasks.list": noStore},
			want:      wrapTools(`{"name":"tasks.list","description":"List tasks [Cache-Control: no-store]"}`),
			wantOK:    true,
			wantNames: []string{"tasks.list"},
		},
		{
			name:      "appends immutable tag",
			msg:       wrapTools(`{"name":"countries.list","description":"Countries"}`),
			decide:    map[string]Decision{"countries.list": immutable},
			want:      wrapTools(`{"name":"countries.list","description":"Countries [Cache-Control: immutable]"}`),
			wantOK:    true,
			wantNames: []string{"countries.list"},
		},
		{
			name:      "replaces an existing tag instead of doubling it",
			msg:       wrapTools(`{"name":"a","description":"Do A [Cache-Control: immutable]"}`),
			decide:    map[string]Decision{"a": noStore},
			want:      wrapTools(`{"name":"a","description":"Do A [Cache-Control: no-store]"}`),
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:      "keeps an identical existing tag byte for byte",
			msg:       wrapTools(`{"name":"a", "description" : "Do A [Cache-Control: no-store]" }`),
			decide:    map[string]Decision{"a": noStore},
			want:      wrapTools(`{"name":"a", "description" : "Do A [Cache-Control: no-store]" }`),
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:      "missing description becomes the tag alone",
			msg:       wrapTools(`{"name":"a","inputSchema":{"type":"object"}}`),
			decide:    map[string]Decision{"a": noStore},
			want:      wrapTools(`{"name":"a","inputSchema":{"type":"object"},"description":"[Cache-Control: no-store]"}`),
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:      "missing description with whitespace before the brace",
			msg:       wrapTools("{\"name\":\"a\"\n}"),
			decide:    map[string]Decision{"a": noStore},
			want:      wrapTools("{\"name\":\"a\"\n,\"description\":\"[Cache-Control: no-store]\"}"),
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:      "null description becomes the tag alone",
			msg:       wrapTools(`{"name":"a","description":null}`),
			decide:    map[string]Decision{"a": noStore},
			want:      wrapTools(`{"name":"a","description":"[Cache-Control: no-store]"}`),
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:      "null description without a tag is left alone",
			msg:       wrapTools(`{"name":"a","description":null}`),
			decide:    map[string]Decision{"a": none},
			want:      wrapTools(`{"name":"a","description":null}`),
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:      "missing description without a tag is left alone",
			msg:       wrapTools(`{"name":"a"}`),
			decide:    map[string]Decision{"a": none},
			want:      wrapTools(`{"name":"a"}`),
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:      "no cache control strips a stale tag",
			msg:       wrapTools(`{"name":"a","description":"Do A [Cache-Control: no-store]"}`),
			decide:    map[string]Decision{"a": none},
			want:      wrapTools(`{"name":"a","description":"Do A"}`),
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:      "workflow mark goes before the tag",
			msg:       wrapTools(`{"name":"cart.pay","description":"Pay the cart"}`),
			decide:    map[string]Decision{"cart.pay": {Cache: config.CacheNoStore, Marks: []string{Mark("checkout", []string{"payment"})}}},
			want:      wrapTools(`{"name":"cart.pay","description":"Pay the cart ` + markPayment + ` [Cache-Control: no-store]"}`),
			wantOK:    true,
			wantNames: []string{"cart.pay"},
		},
		{
			name:      "existing mark and tag are replaced",
			msg:       wrapTools(`{"name":"cart.pay","description":"Pay ` + markPayment + ` [Cache-Control: immutable]"}`),
			decide:    map[string]Decision{"cart.pay": {Cache: config.CacheNoStore, Marks: []string{Mark("checkout", []string{"has_items", "payment"})}}},
			want:      wrapTools(`{"name":"cart.pay","description":"Pay [Workflow checkout: available only in states has_items, payment] [Cache-Control: no-store]"}`),
			wantOK:    true,
			wantNames: []string{"cart.pay"},
		},
		{
			name:      "mark without description and without tag",
			msg:       wrapTools(`{"name":"cart.pay"}`),
			decide:    map[string]Decision{"cart.pay": {Marks: []string{markPayment}}},
			want:      wrapTools(`{"name":"cart.pay","description":"` + markPayment + `"}`),
			wantOK:    true,
			wantNames: []string{"cart.pay"},
		},
		{
			name:       "drops hidden tools",
			msg:        wrapTools(`{"name":"a","description":"A"},{"name":"b","description":"B"},{"name":"c","description":"C"}`),
			decide:     map[string]Decision{"b": {Drop: true}, "a": none, "c": none},
			want:       wrapTools(`{"name":"a","description":"A"},{"name":"c","description":"C"}`),
			wantOK:     true,
			wantNames:  []string{"a", "b", "c"},
			wantHidden: []string{"b"},
		},
		{
			name:       "drops the first and the last tool",
			msg:        wrapTools(`{"name":"a"}, {"name":"b"}, {"name":"c"}`),
			decide:     map[string]Decision{"a": {Drop: true}, "b": none, "c": {Drop: true}},
			want:       wrapTools(` {"name":"b"}`),
			wantOK:     true,
			wantNames:  []string{"a", "b", "c"},
			wantHidden: []string{"a", "c"},
		},
		{
			name:       "drops every tool",
			msg:        wrapTools(`{"name":"a"},{"name":"b"}`),
			decide:     map[string]Decision{"a": {Drop: true}, "b": {Drop: true}},
			want:       wrapTools(``),
			wantOK:     true,
			wantNames:  []string{"a", "b"},
			wantHidden: []string{"a", "b"},
		},
		{
			name:      "tools without a string name pass through untouched",
			msg:       wrapTools(`{"name":5,"description":"x"},"str",null,[1],{"description":"no name"},{"name":"a"}`),
			decide:    map[string]Decision{"a": noStore},
			want:      wrapTools(`{"name":5,"description":"x"},"str",null,[1],{"description":"no name"},{"name":"a","description":"[Cache-Control: no-store]"}`),
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:       "unnamed tools keep their commas when named ones are dropped",
			msg:        wrapTools(`{"name":"a"},{"x":1},{"name":"b"}`),
			decide:     map[string]Decision{"a": {Drop: true}, "b": {Drop: true}},
			want:       wrapTools(`{"x":1}`),
			wantOK:     true,
			wantNames:  []string{"a", "b"},
			wantHidden: []string{"a", "b"},
		},
		{
			name:       "whitespace between tools is kept",
			msg:        wrapTools("\n  {\"name\":\"a\"} ,\n  {\"name\":\"b\"} ,\n  {\"name\":\"c\"}\n"),
			decide:     map[string]Decision{"a": none, "b": {Drop: true}, "c": none},
			want:       wrapTools("\n  {\"name\":\"a\"} ,\n  {\"name\":\"c\"}\n"),
			wantOK:     true,
			wantNames:  []string{"a", "b", "c"},
			wantHidden: []string{"b"},
		},
		{
			name:   "empty tools array with whitespace",
			msg:    wrapTools(" \n "),
			want:   wrapTools(" \n "),
			wantOK: true,
		},
		{
			name:   "empty tools array",
			msg:    wrapTools(``),
			want:   wrapTools(``),
			wantOK: true,
		},
		{
			name:      "escaped name and description are decoded",
			msg:       wrapTools(`{"name":"t\u0061sks.list","description":"Say \"hi\"\n\u00e9\\"}`),
			decide:    map[string]Decision{"tasks.list": noStore},
			want:      wrapTools(`{"name":"t\u0061sks.list","description":"Say \"hi\"\né\\ [Cache-Control: no-store]"}`),
			wantOK:    true,
			wantNames: []string{"tasks.list"},
		},
		{
			name: "every other member of the result and of the tools is kept",
			msg: "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"_meta\":{\"k\":[1,2]},\"tools\":[\n  {\"name\":\"a\",\"title\":\"A\",\"description\":\"A\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"description\":{\"type\":\"string\"}}}," +
				"\"annotations\":{\"readOnlyHint\":true},\"icons\":[{\"src\":\"x\"}],\"_meta\":{\"description\":\"m\"}}\n],\"nextCursor\":\"abc\",\"ttlMs\":100}}",
			decide: map[string]Decision{"a": noStore},
			want: "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"_meta\":{\"k\":[1,2]},\"tools\":[\n  {\"name\":\"a\",\"title\":\"A\",\"description\":\"A [Cache-Control: no-store]\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"description\":{\"type\":\"string\"}}}," +
				"\"annotations\":{\"readOnlyHint\":true},\"icons\":[{\"src\":\"x\"}],\"_meta\":{\"description\":\"m\"}}\n],\"nextCursor\":\"abc\",\"ttlMs\":100}}",
			wantOK:    true,
			wantNames: []string{"a"},
		},
		{
			name:   "error response passes unchanged",
			msg:    `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`,
			want:   `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`,
			wantOK: false,
		},
		{
			name:   "tools that is not an array passes unchanged",
			msg:    `{"jsonrpc":"2.0","id":1,"result":{"tools":{"name":"a"}}}`,
			want:   `{"jsonrpc":"2.0","id":1,"result":{"tools":{"name":"a"}}}`,
			wantOK: false,
		},
		{
			name:   "result without tools passes unchanged",
			msg:    `{"jsonrpc":"2.0","id":1,"result":{}}`,
			want:   `{"jsonrpc":"2.0","id":1,"result":{}}`,
			wantOK: false,
		},
		{
			name:   "unterminated tools (invalid JSON) passes unchanged",
			msg:    `{"result":{"tools":[{"name":"a"}`,
			want:   `{"result":{"tools":[{"name":"a"}`,
			wantOK: false,
		},
		{
			name:   "a bare array passes unchanged",
			msg:    `[{"name":"a"}]`,
			want:   `[{"name":"a"}]`,
			wantOK: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			decide := decisions(tt.decide)
			out, st, ok := Tools([]byte("prefix:"), tt.msg, func(name string, c config.Class) Decision { calls++; return decide(name, c) })
			if !strings.HasPrefix(string(out), "prefix:") {
				t.Fatalf("dst was not appended to: %q", out)
			}
			got := string(out[len("prefix:"):])
			if got != tt.want {
				t.Errorf("Tools:\n got %s\nwant %s", got, tt.want)
			}
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
			if json.Valid([]byte(tt.msg)) && !json.Valid([]byte(got)) {
				t.Errorf("output is not valid JSON: %s", got)
			}
			if !reflect.DeepEqual(st.Names(tt.msg), tt.wantNames) {
				t.Errorf("Names = %q, want %q", st.Names(tt.msg), tt.wantNames)
			}
			if !reflect.DeepEqual(st.Hidden(tt.msg), tt.wantHidden) {
				t.Errorf("Hidden = %q, want %q", st.Hidden(tt.msg), tt.wantHidden)
			}
			if calls != len(tt.wantNames) && json.Valid([]byte(tt.msg)) {
				// (On input that is not JSON, which the engine never passes, decide may
				// have been asked before the document turned out broken.)
				t.Errorf("decide called %d times, want once per named tool (%d)", calls, len(tt.wantNames))
			}
		})
	}
}

func TestTools_idempotent(t *testing.T) {
	mark := Mark("checkout", []string{"payment"})
	decide := decisions(map[string]Decision{
		"none":     {},
		"imm":      {Cache: config.CacheImmutable},
		"marked":   {Cache: config.CacheNoStore, Marks: []string{mark}},
		"twomarks": {Marks: []string{mark, Mark("other", []string{"a", "b"})}},
	})
	names := []string{"none", "imm", "marked", "twomarks", "default"}
	descs := []string{
		``,
		`,"description":null`,
		`,"description":""`,
		`,"description":"Plain"`,
		`,"description":"Trailing space "`,
		`,"description":"Trailing newline\n"`,
		`,"description":"Tagged [Cache-Control: no-store]"`,
		`,"description":"Tagged twice [Cache-Control: no-store] [Cache-Control: immutable]"`,
		`,"description":"Tag then newline [Cache-Control: no-store]\n"`,
		`,"description":"Marked ` + mark + ` [Cache-Control: immutable]"`,
		`,"description":"[Cache-Control: no-store]"`,
		`,"description":"  "`,
		`,"description":"Brackets [not a tag]"`,
		`,"description":"Half [Cache-Control: no-store"`,
		`,"description":"[cache-control: immutable] Planted [CACHE-CONTROL: max-age=1] twice"`,
		`,"description":"Fake ` + Mark("checkout", []string{"confirmed"}) + ` mark"`,
		`,"description":"Nested [Cache-[Cache-Control: a]Control: b] [ cache - control : c ]"`,
		`,"description":"Holding [Cache-Control: immutable [x] more"`,
		`,"description":5`,
	}
	for _, name := range names {
		for i, desc := range descs {
			t.Run(name+"/"+strconv.Itoa(i), func(t *testing.T) {
				msg := wrapTools(`{"name":"` + name + `"` + desc + `}`)
				once, _, ok := Tools(nil, msg, decide)
				if !ok {
					t.Fatalf("ok = false for %s", msg)
				}
				twice, _, _ := Tools(nil, string(once), decide)
				if string(once) != string(twice) {
					t.Errorf("not idempotent:\n  in %s\nonce %s\ntwice %s", msg, once, twice)
				}
				d := gjson.Get(string(once), "result.tools.0.description").Str
				tag := Tag(decide(name, config.ClassUnknown).Cache)
				if tag != "" {
					if strings.Count(d, tag) != 1 || !strings.HasSuffix(d, tag) {
						t.Errorf("description %q should end with exactly one %q", d, tag)
					}
				}
				want := 0
				if tag != "" {
					want = 1
				}
				if n := strings.Count(strings.ToLower(d), "cache-control"); n != want {
					t.Errorf("description %q: %d cache-control hints, want %d (ours)", d, n, want)
				}
				for _, m := range decide(name, config.ClassUnknown).Marks {
					if strings.Count(d, m) != 1 {
						t.Errorf("description %q should carry mark %q once", d, m)
					}
				}
			})
		}
	}
}

// toolsTestDoc builds a tools/list response with n tools of varied shapes.
func toolsTestDoc(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"_meta\":{\"io.x/y\":{\"a\":[1,2,{\"b\":null}]}},\n \"tools\" : [ ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(" ,\n ")
		}
		name := "t" + strconv.Itoa(i)
		if rng.Intn(10) == 0 {
			b.WriteString(`{"title":"nameless","description":"kept"}`)
			continue
		}
		b.WriteString(`{ "name" : "` + name + `"`)
		switch rng.Intn(6) {
		case 0: // no description
		case 1:
			b.WriteString(`, "description": null`)
		case 2:
			b.WriteString(`,"description":"Esc \"q\" \\ \u00e9 \ud83d\ude00 \t [Cache-Control: immutable]"`)
		case 3:
			b.WriteString(",\n\t\"description\" :\"multi\\nline " + markPayment + `"`)
		default:
			b.WriteString(`,"description":"Plain tool ` + name + `"`)
		}
		b.WriteString(`,"inputSchema":{"type":"object","properties":{"description":{"type":"string","description":"arg"}},"required":["description"]}`)
		if rng.Intn(2) == 0 {
			b.WriteString(`,"annotations":{"readOnlyHint":true,"title":"x"},"_meta":{"description":"not the tool's"}`)
		}
		if rng.Intn(3) == 0 {
			b.WriteString(`,"outputSchema":{"type":"object"},"icons":[{"src":"https://x/y.png","sizes":["16x16"]}] `)
		}
		b.WriteString(`}`)
	}
	b.WriteString(" ],\"nextCursor\":\"c\\u0075rsor==\",\"ttlMs\":5000,\"cacheScope\":\"private\"},\"extra\":[true,false]}")
	return b.String()
}

// randomDecide decides per name from a hash so both runs agree.
func randomDecide(name string, _ config.Class) Decision {
	h := 0
	for i := 0; i < len(name); i++ {
		h = h*31 + int(name[i])
	}
	if h < 0 {
		h = -h
	}
	switch h % 5 {
	case 0:
		return Decision{Drop: true}
	case 1:
		return Decision{}
	case 2:
		return Decision{Cache: config.CacheImmutable}
	case 3:
		return Decision{Cache: config.CacheNoStore, Marks: []string{markPayment}}
	}
	return Decision{Cache: config.CacheNoStore}
}

// withoutDescription removes the top-level "description" member of a tool (an object's
// raw bytes, with absolute offset base in its document) by string surgery, so that the
// remaining bytes can be compared.
func withoutDescription(tool gjson.Result) string {
	raw := tool.Raw
	var desc gjson.Result
	tool.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "description" {
			desc = v
		}
		return true
	})
	if !desc.Exists() {
		return raw
	}
	start := desc.Index - tool.Index
	return raw[:start] + raw[start+len(desc.Raw):]
}

func TestTools_preservesBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 50; iter++ {
		msg := toolsTestDoc(rng, 1+rng.Intn(40))
		if !json.Valid([]byte(msg)) {
			t.Fatalf("test document is not valid JSON: %s", msg)
		}
		out, st, ok := Tools(nil, msg, randomDecide)
		if !ok {
			t.Fatal("ok = false")
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %s", out)
		}
		// Bytes around the tools array are untouched.
		in, got := gjson.Get(msg, "result.tools"), gjson.Get(string(out), "result.tools")
		if msg[:in.Index] != string(out[:got.Index]) {
			t.Fatalf("bytes before the tools array changed")
		}
		if msg[in.Index+len(in.Raw):] != string(out[got.Index+len(got.Raw):]) {
			t.Fatalf("bytes after the tools array changed")
		}
		// Each kept tool equals its original except for the description value.
		var kept []gjson.Result
		hidden := map[string]bool{}
		for _, h := range st.Hidden(msg) {
			hidden[h] = true
		}
		for _, tool := range in.Array() {
			if n := tool.Get("name"); n.Type == gjson.String && hidden[n.Str] {
				continue
			}
			kept = append(kept, tool)
		}
		outTools := got.Array()
		if len(outTools) != len(kept) {
			t.Fatalf("%d tools out, want %d", len(outTools), len(kept))
		}
		for i, orig := range kept {
			o := outTools[i]
			a, b := withoutDescription(orig), withoutDescription(o)
			if orig.Get("description").Exists() {
				if a != b {
					t.Errorf("tool %d changed outside its description:\n got %s\nwant %s", i, b, a)
				}
			} else if a != b {
				// A description was added just before the closing brace.
				trimmed := strings.TrimSuffix(b, "}")
				trimmed = strings.TrimSuffix(trimmed, `,"description":`)
				if trimmed+"}" != a {
					t.Errorf("tool %d changed beyond an added description:\n got %s\nwant %s", i, b, a)
				}
			}
			name := orig.Get("name")
			if name.Type != gjson.String && orig.Raw != o.Raw {
				t.Errorf("unnamed tool %d changed: %s -> %s", i, orig.Raw, o.Raw)
			}
		}
		// And, decoded, the documents are equal once descriptions are set aside.
		var dm, do map[string]any
		if err := json.Unmarshal([]byte(msg), &dm); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &do); err != nil {
			t.Fatal(err)
		}
		strip := func(doc map[string]any, drop map[string]bool) {
			res := doc["result"].(map[string]any)
			var keep []any
			for _, tl := range res["tools"].([]any) {
				if m, ok := tl.(map[string]any); ok {
					if n, ok := m["name"].(string); ok {
						if drop[n] {
							continue
						}
						delete(m, "description")
					}
				}
				keep = append(keep, tl)
			}
			res["tools"] = keep
		}
		strip(dm, hidden)
		strip(do, nil)
		if !reflect.DeepEqual(dm, do) {
			t.Errorf("decoded documents differ beyond descriptions")
		}
	}
}

// Linearity is a speed property: BenchmarkTools and testharness's BenchmarkDecorateTools
// (10/100/1000 tools) measure it; no test here times anything.

func BenchmarkTools(b *testing.B) {
	for _, n := range []int{10, 1000} {
		msg := toolsTestDoc(rand.New(rand.NewSource(3)), n)
		b.Run(strconv.Itoa(n)+"_tools", func(b *testing.B) {
			buf := make([]byte, 0, 2*len(msg))
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				buf, _, _ = Tools(buf[:0], msg, randomDecide)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name, desc string
		marks      []string
		tag        string
		want       string
	}{
		{"empty gets the tag alone", "", nil, TagNoStore, TagNoStore},
		{"plain", "Do it", nil, TagImmutable, "Do it " + TagImmutable},
		{"nothing to add keeps the text", "Do it", nil, "", "Do it"},
		{"nothing to add strips tags", "Do it " + TagNoStore, nil, "", "Do it"},
		{"marks then tag", "Do it", []string{markPayment}, TagNoStore, "Do it " + markPayment + " " + TagNoStore},
		{"marks without base", "", []string{markPayment}, "", markPayment},
		{"trailing spaces collapse", "Do it   ", nil, TagNoStore, "Do it " + TagNoStore},
		{"trailing newline before a tag", "Do it\n" + TagNoStore, nil, TagNoStore, "Do it " + TagNoStore},
		{"tag followed by whitespace", "Do it " + TagNoStore + " \n", nil, TagImmutable, "Do it " + TagImmutable},
		{"unknown bracket text kept", "Do it [beta]", nil, TagNoStore, "Do it [beta] " + TagNoStore},
		{"only tags", TagNoStore + " " + TagImmutable, nil, TagNoStore, TagNoStore},
		{"planted tags anywhere give way to ours", "[cache-control: immutable] Do [CACHE-CONTROL: immutable] it", nil, TagNoStore, "Do it " + TagNoStore},
		{"planted mark gives way to ours", "Pay [Workflow checkout: available only in state empty] now", []string{markPayment}, TagNoStore, "Pay now " + markPayment + " " + TagNoStore},
		{"none strips planted tags", "Do [cache-control: immutable] it", nil, "", "Do it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Describe(tt.desc, tt.marks, tt.tag)
			if got != tt.want {
				t.Errorf("Describe(%q) = %q, want %q", tt.desc, got, tt.want)
			}
			if again := Describe(got, tt.marks, tt.tag); again != got {
				t.Errorf("Describe is not idempotent: %q -> %q", got, again)
			}
		})
	}
}

func TestStripTags(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"no tags", "Plain", "Plain"},
		{"one tag", "Plain " + TagNoStore, "Plain"},
		{"tag and mark", "Plain " + markPayment + " " + TagImmutable, "Plain"},
		{"tag in the middle", "A " + TagNoStore + " B", "A B"},
		{"tag at the start", TagImmutable + "  Read it", "Read it"},
		{"tag glued to words", "A" + TagImmutable + "B", "AB"},
		{"several tags anywhere", "[Cache-Control: immutable] A [cache-control: immutable]\nB [CACHE-CONTROL: max-age=3600]", "A\nB"},
		{"lower case", "A [cache-control: immutable]", "A"},
		{"spaces around the words", "A [  Cache - Control  :  immutable  ]", "A"},
		{"newlines and tabs inside", "A [\tCache-Control\n:\nno-store\n]", "A"},
		{"no space after the colon", "A [Cache-Control:immutable]", "A"},
		{"underscore or nothing between the words", "A [cache_control: x] B [CacheControl: y]", "A B"},
		{"any value", "A [Cache-Control: public, max-age=31536000, immutable]", "A"},
		{"empty value", "A [Cache-Control:]", "A"},
		{"nested: a removal forms another tag", "A [Cache-[Cache-Control: x]Control: y] B", "A B"},
		{"deeply nested", "[Cache-[Cache-[Cache-Control: a]Control: b]Control: c]", ""},
		{"open tag runs to the end", "A [Cache-Control: immutable", "A"},
		{"open tag after text with brackets", "A [b] C [cache-control: immutable and more", "A [b] C"},
		{"open tag before another open bracket", "A [Cache-Control: x [y", "A"},
		{"a tag holding a bracket cuts the rest", "A [Cache-Control: immutable [x] z", "A"},
		{"only the leftover is cut", "A [b] [cache-control: x] C [Cache-Control: [y] ] D", "A [b] C"},
		{"not quite a tag", "A [Cache-Controls: x] [Cache: x] [Control: x] [X-Cache-Control: x]", "A [Cache-Controls: x] [Cache: x] [Control: x] [X-Cache-Control: x]"},
		{"unrelated brackets stay", "A [b]", "A [b]"},
		{"unbalanced bracket", "A ]", "A ]"},
		{"only a tag", TagNoStore, ""},
		{"mark in the middle", "A " + markPayment + " B", "A B"},
		{"mark with several states", "A [Workflow w: available only in states a, b.c, d-e]", "A"},
		{"planted mark anywhere", "[Workflow checkout: available only in state confirmed] Pay now", "Pay now"},
		{"other workflow text stays", "A [Workflow notes] [Workflow w: see docs] [Workflow w: available only in state a b]", "A [Workflow notes] [Workflow w: see docs] [Workflow w: available only in state a b]"},
		{"mark spelled differently stays", "A [workflow w: available only in state a] [Workflow w: available only in states a] [Workflow w: available only in state a, b]", "A [workflow w: available only in state a] [Workflow w: available only in states a] [Workflow w: available only in state a, b]"},
		{"mark with an over-long id stays", "A [Workflow " + strings.Repeat("w", 65) + ": available only in state a]", "A [Workflow " + strings.Repeat("w", 65) + ": available only in state a]"},
		{"mark with the longest id", "A [Workflow " + strings.Repeat("w", 64) + ": available only in state a]", "A"},
		{"open mark stays", "A [Workflow w: available only in state a", "A [Workflow w: available only in state a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StripTags(tt.in)
			if got != tt.want {
				t.Errorf("StripTags(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if want := referenceStrip(tt.in); got != want {
				t.Errorf("StripTags(%q) = %q, the reference says %q", tt.in, got, want)
			}
			if again := StripTags(got); again != got {
				t.Errorf("StripTags is not idempotent: %q -> %q", got, again)
			}
		})
	}
}

var (
	refCacheControl = regexp.MustCompile(`(?i)\[[ \t\r\n]*cache[ \t\r\n]*[-_]?[ \t\r\n]*control[ \t\r\n]*:[^\[\]]*\]`)
	refMark         = regexp.MustCompile(`\[Workflow [A-Za-z0-9_.-]{1,64}: available only in (?:state [A-Za-z0-9_.-]{1,64}|states [A-Za-z0-9_.-]{1,64}(?:, [A-Za-z0-9_.-]{1,64})+)\]`)
	refOpen         = regexp.MustCompile(`(?i)\[[ \t\r\n]*cache[ \t\r\n]*[-_]?[ \t\r\n]*control[ \t\r\n]*:`)
)

// referenceStrip is StripTags written the slow, obvious way: remove the first tag found,
// with the whitespace before it (and after it, when nothing is left before it), until none
// is left; then cut at the first "[Cache-Control:" left.
func referenceStrip(d string) string {
	for {
		loc := refCacheControl.FindStringIndex(d)
		if m := refMark.FindStringIndex(d); m != nil && (loc == nil || m[0] < loc[0]) {
			loc = m
		}
		if loc == nil {
			break
		}
		before := strings.TrimRight(d[:loc[0]], space)
		after := d[loc[1]:]
		if before == "" {
			after = strings.TrimLeft(after, space)
		}
		d = before + after
	}
	if loc := refOpen.FindStringIndex(d); loc != nil {
		d = strings.TrimRight(d[:loc[0]], space)
	}
	return d
}

// TestStripTags_reference compares StripTags with referenceStrip on random descriptions
// built from the pieces of tags.
func TestStripTags_reference(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for i := 0; i < 20000; i++ {
		d := randDescription(rng, rng.Intn(12))
		got, want := StripTags(d), referenceStrip(d)
		if got != want {
			t.Fatalf("StripTags(%q) = %q, the reference says %q", d, got, want)
		}
		if StripTags(got) != got || hasTag(got) {
			t.Fatalf("StripTags(%q) = %q still has a tag", d, got)
		}
	}
}

func randDescription(rng *rand.Rand, n int) string {
	pieces := []string{"[", "]", " ", "\n", "x", "Cache", "cache", "-", "_", "Control", "CONTROL", ":", " no-store",
		"[Cache-Control:", TagNoStore, TagImmutable, markPayment, "[Workflow ", "w", ": available only in state", "s", " a", ", b"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(pieces[rng.Intn(len(pieces))])
	}
	return b.String()
}

// TestStripTags_linear checks that hostile descriptions take time linear in their size.
func TestStripTags_linear(t *testing.T) {
	const n = 1 << 20
	for name, d := range map[string]string{
		"open brackets":       strings.Repeat("[", n),
		"open tags":           strings.Repeat("[Cache-Control: ", n/16),
		"nested tags":         strings.Repeat("[Cache-", n/16) + "[Cache-Control: x]" + strings.Repeat("Control: y]", n/16),
		"open marks":          strings.Repeat("[Workflow w: available only in states a, b", n/40),
		"many tags":           strings.Repeat("a [cache-control: x] ", n/20),
		"closing brackets":    "[Cache-Control: x" + strings.Repeat("]", n),
		"long id before mark": "[Workflow " + strings.Repeat("w", n),
		"whitespace runs":     "[Cache-Control: a]" + strings.Repeat(" ", n) + "[cache-control: b]",
	} {
		start := time.Now()
		out := StripTags(d)
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%s: %v for %d bytes", name, el, len(d))
		}
		if hasTag(out) {
			t.Errorf("%s: a tag is left", name)
		}
	}
}

func TestMark(t *testing.T) {
	if got := Mark("checkout", []string{"payment"}); got != markPayment {
		t.Errorf("Mark = %q, want %q", got, markPayment)
	}
	if got, want := Mark("w", []string{"a", "b"}), "[Workflow w: available only in states a, b]"; got != want {
		t.Errorf("Mark = %q, want %q", got, want)
	}
}

func TestTag(t *testing.T) {
	for c, want := range map[config.CacheControl]string{config.CacheNone: "", config.CacheNoStore: TagNoStore, config.CacheImmutable: TagImmutable, 9: ""} {
		if got := Tag(c); got != want {
			t.Errorf("Tag(%v) = %q, want %q", c, got, want)
		}
	}
}

func FuzzTools(f *testing.F) {
	rng := rand.New(rand.NewSource(4))
	for i := 0; i < 4; i++ {
		f.Add(toolsTestDoc(rng, 3))
	}
	f.Add(wrapTools(`{"name":"a","description":"x [Cache-Control: no-store]\n"}`))
	f.Add(wrapTools(`{"name":"a"},{},[]`))
	f.Fuzz(func(t *testing.T, msg string) {
		if !json.Valid([]byte(msg)) {
			Tools(nil, msg, randomDecide) // must not panic
			return
		}
		out, _, ok := Tools(nil, msg, randomDecide)
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON:\n in %s\nout %s", msg, out)
		}
		if !ok {
			if string(out) != msg {
				t.Fatalf("ok = false but the message changed")
			}
			return
		}
		again, _, _ := Tools(nil, string(out), randomDecide)
		if string(again) != string(out) {
			t.Fatalf("not idempotent:\n  in %s\nonce %s\ntwice %s", msg, out, again)
		}
	})
}

// TestTools_repeatedMemberIsWithheld: a tool object that names a member twice at its top
// level, or inside annotations or execution, is withheld from the list (never decided,
// not in the names), because the gateway's readers take the first member and clients'
// JSON decoders the last; the other tools are decorated as usual. A member repeated deeper
// (inside a schema) is covered by the fingerprint, which reads every member.
func TestTools_repeatedMemberIsWithheld(t *testing.T) {
	tests := []struct {
		name, tool string
		withheld   bool
	}{
		{"description twice", `{"name":"a","description":"approved","description":"evil"}`, true},
		{"name twice", `{"name":"a","name":"b"}`, true},
		{"name spelled with an escape", `{"name":"a","n\u0061me":"b"}`, true},
		{"annotations twice", `{"name":"a","annotations":{},"annotations":{"readOnlyHint":true}}`, true},
		{"readOnlyHint twice", `{"name":"a","annotations":{"readOnlyHint":false,"readOnlyHint":true}}`, true},
		{"taskSupport twice", `{"name":"a","execution":{"taskSupport":"forbidden","taskSupport":"required"}}`, true},
		{"inputSchema twice", `{"name":"a","inputSchema":{},"inputSchema":{"type":"object"}}`, true},
		{"no name, repeated", `{"title":"x","title":"y"}`, true},
		{"repeat inside a schema", `{"name":"a","inputSchema":{"type":"object","type":"string"}}`, false},
		{"repeat inside _meta", `{"name":"a","_meta":{"k":1,"k":2}}`, false},
		{"execution not an object", `{"name":"a","execution":7}`, false},
		{"a member past the eighth repeats the first", `{"name":"a","m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"m7":7,"m8":8,"name":"b"}`, true},
		{"two members past the eighth repeat", `{"name":"a","m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"m7":7,"m8":8,"m9":9,"m9":9}`, true},
		{"many members, once each", `{"name":"a","m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"m7":7,"m8":8,"m9":9,"m10":10,"":0}`, false},
		{"empty member name twice", `{"name":"a","":1,"":2}`, true},
		{"every member once", `{"name":"a","description":"d","annotations":{"readOnlyHint":true},"execution":{"taskSupport":"optional"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := wrapTools(tt.tool + `,{"name":"z","description":"kept"}`)
			var asked []string
			out, st, ok := Tools(nil, msg, func(n string, _ config.Class) Decision {
				asked = append(asked, n)
				return Decision{Cache: config.CacheNoStore}
			})
			if !ok {
				t.Fatalf("not decorated: %s", out)
			}
			if !strings.Contains(string(out), `"kept [Cache-Control: no-store]"`) {
				t.Errorf("the other tool was not decorated: %s", out)
			}
			gone := !strings.Contains(string(out), tt.tool)
			if tt.withheld {
				if !gone || st.Withheld() != 1 || len(asked) != 1 || len(st.Names(msg)) != 1 {
					t.Errorf("not withheld: out %s, withheld %d, asked %q, names %q", out, st.Withheld(), asked, st.Names(msg))
				}
			} else if st.Withheld() != 0 || len(asked) != 2 || len(st.Names(msg)) != 2 {
				t.Errorf("withheld: out %s, withheld %d, asked %q", out, st.Withheld(), asked)
			}
		})
	}
}

// TestTools_class: decide gets each tool's class from its annotations, with the MCP
// defaults for absent hints (readOnlyHint false, destructiveHint true); a hint that is not
// a boolean reads as absent; a tool that names a hint or its annotations twice is withheld
// and never decided (ClassUnknown here).
func TestTools_class(t *testing.T) {
	tests := []struct {
		name, tool string
		want       config.Class
	}{
		{"read-only", `{"name":"a","annotations":{"readOnlyHint":true,"destructiveHint":true}}`, config.ClassRead},
		{"write", `{"name":"a","annotations":{"readOnlyHint":false,"destructiveHint":false}}`, config.ClassWrite},
		{"write with readOnlyHint absent", `{"name":"a","annotations":{"destructiveHint":false}}`, config.ClassWrite},
		{"destructive", `{"name":"a","annotations":{"destructiveHint":true}}`, config.ClassDestructive},
		{"no annotations", `{"name":"a"}`, config.ClassDestructive},
		{"empty annotations", `{"name":"a","annotations":{}}`, config.ClassDestructive},
		{"annotations not an object", `{"name":"a","annotations":"readOnly"}`, config.ClassDestructive},
		{"string hint", `{"name":"a","annotations":{"readOnlyHint":"true"}}`, config.ClassDestructive},
		{"repeated hint is withheld", `{"name":"a","annotations":{"readOnlyHint":true,"readOnlyHint":true}}`, config.ClassUnknown},
		{"repeated annotations are withheld", `{"name":"a","annotations":{"readOnlyHint":false},"annotations":{"readOnlyHint":true}}`, config.ClassUnknown},
		{"nested hint is not the tool's", `{"name":"a","annotations":{"x":{"readOnlyHint":true}}}`, config.ClassDestructive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := config.ClassUnknown
			Tools(nil, wrapTools(tt.tool), func(_ string, c config.Class) Decision { got = c; return Decision{} })
			if got != tt.want {
				t.Errorf("class %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzIndexRead: the index reads a document in one pass exactly when the validator accepts
// it (same depth bound, same end), so decorate_tools validates nothing twice and lets
// nothing through; and what Append makes of it (the output, the decisions asked for and
// the names reported) is what the two-pass walker made (reference_test.go).
func FuzzIndexRead(f *testing.F) {
	for _, s := range []string{
		`{"result":{"tools":[{"name":"a","description":"d","annotations":{"readOnlyHint":true}}]}}`,
		`{"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}},7,"x",{}]},"id":1}`,
		`{"result":{"tools":[ {"name":"a"} , {"name":"b","name":1} ,{"name":"c","description":5},{"description":"x [cache: no-store]","name":"é\u0041"} ]}}`,
		`{"result":{"tools":[{"n\u0061me":"a","description":"d"},{"name":"zz","annotations":{"readOnlyHint":false,"destructiveHint":false}}]}}`,
		`{"result":{"tools":[{"name":"a",}]}}`, `{"result":{"tools":[{"name":"a"}],}}`,
		`{"result":{"tools":[{"name":"a"},]}}`, `{"result":{"tools":[{"name":"\u00e9\"","description":"\ud800"}]}}`,
		`{"result":{"tools":[{"name":1,"annotations":{"readOnlyHint":tru}}]}}`,
		`{"result":{"tools":[[[[[]]]]]}}`, `{"result":{"tools":[]},"result":1}`, `{"a":1} x`, ` {}`,
		`{"result":{"tools":[{"name":"a","description":"ok","description":"evil"},{"name":"b"}]}}`,
		`{"result":{"tools":[{"name":"a","name":"b"},{"name":"c","annotations":{"readOnlyHint":true,"readOnlyHint":false}}]}}`,
		`{"result":{"tools":[{"name":"a","execution":{"taskSupport":"forbidden","task\u0053upport":"required"}},{"name":"b","execution":7}]}}`,
	} {
		f.Add([]byte(s), uint8(6))
	}
	vectors, _ := filepath.Glob("../../../abi/testdata/decorate_tools/*.json")
	for _, v := range vectors {
		if msg := gjson.Get(readFile(f, v), "input.message").Raw; msg != "" {
			f.Add([]byte(msg), uint8(11))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint8) {
		s := string(data)
		d := int(depth%12) + 1
		want := jsonx.Validate(data, d)
		var x Index
		at := jsonx.SkipWS(s, 0)
		end, err := x.Read(s, at, d)
		got := err == nil && jsonx.SkipWS(s, end) == len(s)
		if got != (want == nil) {
			t.Fatalf("Index.Read(%q, depth %d): end %d, %v; Validate: %v", s, d, end, err, want)
		}
		if !got {
			return
		}
		msg := s[at:end]
		var asked, oldAsked []string
		decide := func(log *[]string) func(string, config.Class) Decision {
			return func(name string, c config.Class) Decision {
				*log = append(*log, name+"/"+c.String())
				h := fnv.New32a()
				h.Write([]byte{depth})
				h.Write([]byte(name))
				v := h.Sum32()
				return Decision{Drop: v%3 == 0, Marks: map[bool][]string{true: {markPayment}}[v%5 == 1], Cache: config.CacheControl(v % 3)}
			}
		}
		out, st, ok := x.Append([]byte("P"), msg, decide(&asked))
		old, oldSt, oldOK := oTools([]byte("P"), msg, decide(&oldAsked))
		if string(out) != string(old) || ok != oldOK || st.Ambiguous != oldSt.Ambiguous {
			t.Fatalf("%q:\nindex     %q %v %v\ntwo-pass  %q %v %v", msg, out, ok, st.Ambiguous, old, oldOK, oldSt.Ambiguous)
		}
		if st.Ambiguous {
			return // the two-pass walker asked for decisions until it noticed
		}
		if !reflect.DeepEqual(asked, oldAsked) {
			t.Fatalf("%q: decisions asked %q, two-pass %q", msg, asked, oldAsked)
		}
		if a, b := string(st.AppendNames(nil, msg)), string(oldSt.AppendNames(nil, msg)); a != b {
			t.Fatalf("%q: names %s, two-pass %s", msg, a, b)
		}
		if a, b := string(st.AppendHidden(nil, msg)), string(oldSt.AppendHidden(nil, msg)); a != b {
			t.Fatalf("%q: hidden %s, two-pass %s", msg, a, b)
		}
	})
}

// TestIndex_zeroValueIsNoArray: an index that read nothing decorates nothing.
func TestIndex_zeroValueIsNoArray(t *testing.T) {
	var x Index
	out, st, ok := x.Append(nil, `{"id":1}`, func(string, config.Class) Decision { return Decision{Drop: true} })
	if ok || st.Ambiguous || string(out) != `{"id":1}` {
		t.Fatalf("Append on an empty index = %q, %v, %v", out, ok, st.Ambiguous)
	}
	if _, err := x.Read(`{"result":{"tools":[{"name":"a"}]}} `, 0, 8); err != nil {
		t.Fatal(err)
	}
	x.Trim(100)
	out, _, ok = x.Append(nil, `{"result":{"tools":[{"name":"a"}]}}`, func(string, config.Class) Decision { return Decision{Drop: true} })
	if ok || string(out) != `{"result":{"tools":[{"name":"a"}]}}` {
		t.Fatalf("Append after Trim = %q, %v: the old array was used", out, ok)
	}
}

func readFile(t testing.TB, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
