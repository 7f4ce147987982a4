package abi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/abi/schema"
	"github.com/stategate/stategate/plugin/engine"
)

// schemas compiles every embedded schema once per test, resolving the relative $refs
// between them through a loader that maps schema.BaseURI+name to the embedded file.
type schemas map[string]*jsonschema.Resolved

func compileSchemas(t *testing.T) schemas {
	t.Helper()
	files := schema.Files()
	load := func(name string) (*jsonschema.Schema, error) {
		data, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("no embedded schema %q", name)
		}
		s := new(jsonschema.Schema)
		if err := json.Unmarshal(data, s); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return s, nil
	}
	loader := func(u *url.URL) (*jsonschema.Schema, error) {
		name, ok := strings.CutPrefix(u.String(), schema.BaseURI)
		if !ok || strings.Contains(name, "/") {
			return nil, fmt.Errorf("refusing to load %s: not under %s", u, schema.BaseURI)
		}
		return load(name)
	}
	out := schemas{}
	for name := range files {
		s, err := load(name)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.Resolve(&jsonschema.ResolveOptions{BaseURI: schema.BaseURI + name, Loader: loader})
		if err != nil {
			t.Fatalf("compile %s: %v", name, err)
		}
		out[name] = rs
	}
	return out
}

// validate validates instance (a value decoded by encoding/json) against the named schema.
func (s schemas) validate(t *testing.T, name string, instance any) error {
	t.Helper()
	rs, ok := s[name]
	if !ok {
		t.Fatalf("no schema %s", name)
	}
	return rs.Validate(instance)
}

func decode(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func readJSON(t *testing.T, path string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

func TestSchemaFiles(t *testing.T) {
	want := []string{"common.schema.json", "config.schema.json", "error.schema.json",
		"needstate.schema.json", "snapshot.schema.json", "annotations.schema.json"}
	for _, f := range abi.Functions {
		want = append(want, f.Name()+".input.schema.json", f.Name()+".output.schema.json")
	}
	files := schema.Files()
	var got []string
	for name := range files {
		got = append(got, name)
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("schema files:\n got %v\nwant %v", got, want)
	}
	for name, data := range files {
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema is %v, want draft 2020-12", name, doc["$schema"])
		}
		if doc["$id"] != schema.BaseURI+name {
			t.Errorf("%s: $id is %v, want %s", name, doc["$id"], schema.BaseURI+name)
		}
		for _, k := range []string{"title", "description"} {
			if s, _ := doc[k].(string); s == "" {
				t.Errorf("%s: no %s", name, k)
			}
		}
	}
	compileSchemas(t) // every schema, with every $ref, resolves

	// The code enums are abi's constants, no more, no less.
	enum := func(doc map[string]any, path ...string) []string {
		var v any = doc
		for _, p := range path {
			v = v.(map[string]any)[p]
		}
		var out []string
		for _, c := range v.([]any) {
			out = append(out, c.(string))
		}
		sort.Strings(out)
		return out
	}
	var errDoc, common map[string]any
	if err := json.Unmarshal(files["error.schema.json"], &errDoc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(files["common.schema.json"], &common); err != nil {
		t.Fatal(err)
	}
	errCodes := []string{abi.ErrInvalidJSON, abi.ErrInvalidInput, abi.ErrTooDeep, abi.ErrInvalidConfig,
		abi.ErrConfigMissing, abi.ErrUnknownExport, abi.ErrTruncation, abi.ErrHealthOff, abi.ErrNoMatch}
	denyCodes := []string{abi.DenyToolNotAvailable, abi.DenyArrayTooLarge, abi.DenyMissingHandle,
		abi.DenyToolTimeout, abi.DenyGateUnavailable, abi.DenyTooDeep, abi.DenyUpstreamUnavailable, abi.DenyToolDisabled, abi.DenyToolQuarantined, abi.DenyToolAutoDisabled}
	sort.Strings(errCodes)
	sort.Strings(denyCodes)
	if got := enum(errDoc, "properties", "error", "properties", "code", "enum"); !slices.Equal(got, errCodes) {
		t.Errorf("error.schema.json codes %v, abi has %v", got, errCodes)
	}
	if got := enum(common, "$defs", "denialCode", "enum"); !slices.Equal(got, denyCodes) {
		t.Errorf("common.schema.json denial codes %v, abi has %v", got, denyCodes)
	}
}

// TestConfigSchema: every configuration under abi/testdata/config validates except
// invalid.json, and the schema agrees with the parser (engine.CheckConfig) on each.
func TestConfigSchema(t *testing.T) {
	s := compileSchemas(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "config", "*.json"))
	if len(files) == 0 {
		t.Fatal("no configurations under testdata/config")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		err = s.validate(t, "config.schema.json", decode(t, data))
		wantValid := filepath.Base(file) != "invalid.json"
		if wantValid && err != nil {
			t.Errorf("%s: %v", file, err)
		}
		if !wantValid && err == nil {
			t.Errorf("%s: validates, want a schema error", file)
		}
		if got := parserAccepts(t, data); got != wantValid {
			t.Errorf("%s: parser valid=%v, want %v", file, got, wantValid)
		}
	}
}

func parserAccepts(t *testing.T, cfg []byte) bool {
	t.Helper()
	var r struct {
		Valid bool `json:"valid"`
	}
	if err := json.Unmarshal(engine.CheckConfig(cfg), &r); err != nil {
		t.Fatal(err)
	}
	return r.Valid
}

// TestConfigSchemaAgreesWithParser: hand-written configurations on the edges the schema
// expresses. Every one the schema rejects the parser rejects too (the schema never
// forbids a valid configuration), and the accepted ones are valid.
func TestConfigSchemaAgreesWithParser(t *testing.T) {
	s := compileSchemas(t)
	wf := func(extra string) string {
		return `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":"b"}},"b":{}}` + extra + `}]}`
	}
	cases := []struct {
		name, doc string
		valid     bool
	}{
		{"minimal", `{"version":1}`, true},
		{"argument key, final state, per-tool limits", `{"version":1,"principal":{"header":"X-User_1"},
			"workflows":[{"id":"c.1","initial":"a","key":"argument:cart id","states":{"a":{"on":{"GO":"b"},"type":"normal"},"b":{"type":"final","on":{}}},
			"tools":{"t":{"states":["a"],"event":"GO"},"u":{"states":["a","b"]}}}],
			"limits":{"maxArraySize":1073741824,"maxResponseBytes":1024,"timeoutMs":86400000,"tools":{"bulk.*":{"timeoutMs":1}}}}`, true},
		{"separator __", `{"version":1,"names":{"separator":"__"},"stateSync":{"policies":[{"match":"a__*","invalidates":["a__**"]}]}}`, true},
		{"annotations and categories", `{"version":1,"stateSync":{"fromAnnotations":true},
			"limits":{"categories":{"read":{"timeoutMs":5000},"slow-1":{"timeoutMs":86400000}},"tools":{"r.*":{"category":"slow-1","maxArraySize":5}}}}`, true},
		{"fromAnnotations not a boolean", `{"version":1,"stateSync":{"fromAnnotations":"yes"}}`, false},
		{"category without timeoutMs", `{"version":1,"limits":{"categories":{"read":{}}}}`, false},
		{"category with another field", `{"version":1,"limits":{"categories":{"read":{"timeoutMs":1,"retries":2}}}}`, false},
		{"category name with a space", `{"version":1,"limits":{"categories":{"a b":{"timeoutMs":1}}}}`, false},
		{"category timeout 0", `{"version":1,"limits":{"categories":{"read":{"timeoutMs":0}}}}`, false},
		{"tool category not a string", `{"version":1,"limits":{"categories":{"read":{"timeoutMs":1}},"tools":{"a":{"category":1}}}}`, false},
		{"no version", `{}`, false},
		{"version 2", `{"version":2}`, false},
		{"version as string", `{"version":"1"}`, false},
		{"unknown top-level field", `{"version":1,"colour":"blue"}`, false},
		{"unknown names field", `{"version":1,"names":{"sep":"."}}`, false},
		{"empty separator", `{"version":1,"names":{"separator":""}}`, false},
		{"separator with star", `{"version":1,"names":{"separator":"*"}}`, false},
		{"separator over 8", `{"version":1,"names":{"separator":"123456789"}}`, false},
		{"principal without header", `{"version":1,"principal":{}}`, false},
		{"bad header name", `{"version":1,"principal":{"header":"X User"}}`, false},
		{"bad default cacheControl", `{"version":1,"stateSync":{"defaults":{"cacheControl":"private"}}}`, false},
		{"unknown stateSync field", `{"version":1,"stateSync":{"policy":[]}}`, false},
		{"policy without match", `{"version":1,"stateSync":{"policies":[{"cacheControl":"none"}]}}`, false},
		{"policy without effect", `{"version":1,"stateSync":{"policies":[{"match":"a"}]}}`, false},
		{"empty invalidates", `{"version":1,"stateSync":{"policies":[{"match":"a","invalidates":[]}]}}`, false},
		{"invalidates not strings", `{"version":1,"stateSync":{"policies":[{"match":"a","invalidates":[1]}]}}`, false},
		{"unknown policy field", `{"version":1,"stateSync":{"policies":[{"match":"a","cacheControl":"none","ttl":5}]}}`, false},
		{"workflows not an array", `{"version":1,"workflows":{}}`, false},
		{"workflow without initial", `{"version":1,"workflows":[{"id":"w","states":{"a":{}}}]}`, false},
		{"workflow without states", `{"version":1,"workflows":[{"id":"w","initial":"a"}]}`, false},
		{"no states", `{"version":1,"workflows":[{"id":"w","initial":"a","states":{}}]}`, false},
		{"bad workflow id", `{"version":1,"workflows":[{"id":"a b","initial":"a","states":{"a":{}}}]}`, false},
		{"bad key", wf(`,"key":"header:x"`), false},
		{"empty argument key", wf(`,"key":"argument:"`), false},
		{"unknown workflow field", wf(`,"owner":"me"`), false},
		{"unknown state field", `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"final":true}}}]}`, false},
		{"bad state type", `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"type":"end"}}}]}`, false},
		{"final state with transitions", `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"type":"final","on":{"GO":"a"}}}}]}`, false},
		{"target not a string", `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"GO":1}}}}]}`, false},
		{"tool without states", wf(`,"tools":{"t":{"event":"GO"}}`), false},
		{"tool with empty states", wf(`,"tools":{"t":{"states":[]}}`), false},
		{"unknown binding field", wf(`,"tools":{"t":{"states":["a"],"when":"now"}}`), false},
		{"empty tool name", wf(`,"tools":{"":{"states":["a"]}}`), false},
		{"maxArraySize 0", `{"version":1,"limits":{"maxArraySize":0}}`, false},
		{"maxResponseBytes under 1024", `{"version":1,"limits":{"maxResponseBytes":1023}}`, false},
		{"timeoutMs fraction", `{"version":1,"limits":{"timeoutMs":1.5}}`, false},
		{"timeoutMs over a day", `{"version":1,"limits":{"timeoutMs":86400001}}`, false},
		{"timeoutMs as string", `{"version":1,"limits":{"timeoutMs":"30s"}}`, false},
		{"unknown limits field", `{"version":1,"limits":{"maxDepth":10}}`, false},
		{"unknown tool limits field", `{"version":1,"limits":{"tools":{"a":{"maxDepth":1}}}}`, false},
		{"tool limits out of range", `{"version":1,"limits":{"tools":{"a":{"maxArraySize":0}}}}`, false},
		{"approvals", `{"version":1,"stateSync":{"fromAnnotations":true},"approvals":[{"match":"cart.pay","by":"operator","message":"Pay?","timeoutMs":1000},{"match":"**","by":"user","when":"destructive","timeoutMs":86400000}]}`, true},
		{"approvals not an array", `{"version":1,"approvals":{"match":"**","by":"user"}}`, false},
		{"approval without by", `{"version":1,"approvals":[{"match":"**"}]}`, false},
		{"approval without match", `{"version":1,"approvals":[{"by":"user"}]}`, false},
		{"approval by admin", `{"version":1,"approvals":[{"match":"**","by":"admin"}]}`, false},
		{"approval with another field", `{"version":1,"approvals":[{"match":"**","by":"user","ask":true}]}`, false},
		{"approval message empty", `{"version":1,"approvals":[{"match":"**","by":"user","message":""}]}`, false},
		{"approval message with an escape", `{"version":1,"approvals":[{"match":"**","by":"user","message":"a\u001bb"}]}`, false},
		{"approval message with a bidi override", `{"version":1,"approvals":[{"match":"**","by":"user","message":"a\u202eb"}]}`, false},
		{"approval message of 513 characters", `{"version":1,"approvals":[{"match":"**","by":"user","message":"` + strings.Repeat("x", 513) + `"}]}`, false},
		{"approval timeout under a second", `{"version":1,"approvals":[{"match":"**","by":"user","timeoutMs":999}]}`, false},
		{"approval timeout over a day", `{"version":1,"approvals":[{"match":"**","by":"user","timeoutMs":86400001}]}`, false},
		{"approval when always", `{"version":1,"stateSync":{"fromAnnotations":true},"approvals":[{"match":"**","by":"user","when":"always"}]}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.validate(t, "config.schema.json", decode(t, []byte(c.doc)))
			if c.valid && err != nil {
				t.Errorf("schema: %v", err)
			}
			if !c.valid && err == nil {
				t.Errorf("schema accepts it, want a rejection")
			}
			if got := parserAccepts(t, []byte(c.doc)); got != c.valid {
				t.Errorf("parser valid=%v, want %v", got, c.valid)
			}
		})
	}
}

type vector struct {
	Config json.RawMessage `json:"config"`
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
}

// TestVectorsAgainstSchemas validates every golden vector: its configuration, its input
// (JSON inputs only: a raw string is a deliberately malformed or too-deep document), its
// output, and every snapshot it carries.
func TestVectorsAgainstSchemas(t *testing.T) {
	s := compileSchemas(t)
	var nInputs, nRejected, nRaw, nOutputs, nSnapshots, nConfigs int
	for _, fn := range abi.Functions {
		files, _ := filepath.Glob(filepath.Join("testdata", fn.Name(), "*.json"))
		if len(files) == 0 {
			t.Errorf("no vectors for %s", fn.Name())
		}
		for _, file := range files {
			name := fn.Name() + "/" + strings.TrimSuffix(filepath.Base(file), ".json")
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var v vector
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			output := decode(t, v.Output)
			errCode := errorCode(output)

			// The configuration, named or inline: valid unless the answer says it is not.
			var cfg any
			var cfgName string
			if json.Unmarshal(v.Config, &cfgName) == nil {
				cfg = readJSON(t, filepath.Join("testdata", "config", cfgName+".json"))
			} else {
				cfg = decode(t, v.Config)
			}
			nConfigs++
			cfgInvalid := errCode == abi.ErrInvalidConfig
			if m, ok := output.(map[string]any); ok && fn == abi.FuncCheckConfig && m["valid"] == false {
				cfgInvalid = true
			}
			if err := s.validate(t, "config.schema.json", cfg); cfgInvalid && err == nil {
				t.Errorf("%s: configuration validates, but the answer says it is invalid", name)
			} else if !cfgInvalid && err != nil {
				t.Errorf("%s: configuration: %v", name, err)
			}

			// The input. An input the engine refuses as INVALID_INPUT must fail the schema
			// (a wrong type or a missing required member); any other must pass.
			var raw string
			if json.Unmarshal(v.Input, &raw) == nil {
				nRaw++
			} else {
				input := decode(t, v.Input)
				nInputs++
				err := s.validate(t, fn.Name()+".input.schema.json", input)
				switch {
				case errCode == abi.ErrInvalidInput && err == nil:
					t.Errorf("%s: input validates, but the engine refuses it as INVALID_INPUT", name)
				case errCode == abi.ErrInvalidInput:
					nRejected++
				case err != nil:
					t.Errorf("%s: input: %v", name, err)
				}
				nSnapshots += checkSnapshots(t, s, name+" input", input)
			}

			nOutputs++
			if err := s.validate(t, fn.Name()+".output.schema.json", output); err != nil {
				t.Errorf("%s: output: %v", name, err)
			}
			if errCode != "" {
				if err := s.validate(t, "error.schema.json", output); err != nil {
					t.Errorf("%s: error output: %v", name, err)
				}
			}
			if m, ok := output.(map[string]any); ok && m["needState"] != nil {
				if err := s.validate(t, "needstate.schema.json", output); err != nil {
					t.Errorf("%s: needState output: %v", name, err)
				}
			}
			nSnapshots += checkSnapshots(t, s, name+" output", output)
		}
	}
	if nRejected == 0 || nSnapshots == 0 {
		t.Errorf("expected some INVALID_INPUT vectors and some snapshots; got %d and %d", nRejected, nSnapshots)
	}
	t.Logf("%d configurations, %d JSON inputs (%d rejected as INVALID_INPUT, %d raw skipped), %d outputs, %d snapshots",
		nConfigs, nInputs, nRejected, nRaw, nOutputs, nSnapshots)
}

func errorCode(output any) string {
	m, _ := output.(map[string]any)
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// checkSnapshots validates every object value of a top-level "states" member against
// snapshot.schema.json and returns how many it checked.
func checkSnapshots(t *testing.T, s schemas, where string, doc any) int {
	t.Helper()
	m, _ := doc.(map[string]any)
	states, _ := m["states"].(map[string]any)
	n := 0
	for key, snap := range states {
		if _, ok := snap.(map[string]any); !ok || abi.IsHealthKey(key) {
			continue // health records are checked by the export schemas (healthWrites)
		}
		n++
		schema := "snapshot.schema.json"
		if strings.HasPrefix(key, "stategate/annotations/") {
			schema = "annotations.schema.json"
		}
		if err := s.validate(t, schema, snap); err != nil {
			t.Errorf("%s: snapshot %s: %v", where, key, err)
		}
	}
	return n
}

// TestSchemasRejectWrongDocuments: hand-written wrong documents fail their schema.
func TestSchemasRejectWrongDocuments(t *testing.T) {
	s := compileSchemas(t)
	timeout := `{"content":[{"type":"text","text":"t"}],"isError":true,"_meta":{"dev.stategate/error":{"code":"TOOL_TIMEOUT","retryable":true,"details":{"tool":"x","timeoutMs":1}}}}`
	allow := `{"allow":true,"timeoutMs":1,"onTimeout":` + timeout + `,"notices":[]}`
	snap := `{"workflow":"w","fingerprint":"712bfba3e84cae296669be36f3bc554b","state":"a","seq":1}`
	host := `{"principalHeader":"","maxTimeoutMs":30000,"listChanged":false,"tools":{},"health":null}`
	cases := []struct {
		name, schema, doc string
		valid             bool
	}{
		// Controls: the well-formed documents the wrong ones are derived from.
		{"allow (control)", "check_limits.output.schema.json", allow, true},
		{"snapshot (control)", "snapshot.schema.json", snap, true},
		{"error (control)", "error.schema.json", `{"error":{"code":"INVALID_JSON","message":"m"}}`, true},

		{"missing allow", "check_limits.output.schema.json", `{"timeoutMs":1,"onTimeout":` + timeout + `,"notices":[]}`, false},
		{"timeoutMs as string", "check_limits.output.schema.json", strings.Replace(allow, `"timeoutMs":1,`, `"timeoutMs":"1",`, 1), false},
		{"timeoutMs fraction", "check_limits.output.schema.json", strings.Replace(allow, `"timeoutMs":1,`, `"timeoutMs":1.5,`, 1), false},
		{"timeout result not retryable", "check_limits.output.schema.json", strings.Replace(allow, `"retryable":true`, `"retryable":false`, 1), false},
		{"denial without result", "check_limits.output.schema.json", `{"allow":false,"code":"ARRAY_TOO_LARGE","retryable":false,"details":{"tool":"x","path":"a","limit":1,"actual":2,"oversizedArrays":1},"notices":[]}`, false},
		{"denial with the wrong details", "check_limits.output.schema.json", `{"allow":false,"code":"ARRAY_TOO_LARGE","retryable":false,"details":{"tool":"x"},"result":` + strings.Replace(timeout, "TOOL_TIMEOUT", "ARRAY_TOO_LARGE", 1) + `,"notices":[]}`, false},
		{"unknown error code", "error.schema.json", `{"error":{"code":"OOPS","message":"m"}}`, false},
		{"unknown error code (export)", "transition.output.schema.json", `{"error":{"code":"OOPS","message":"m"}}`, false},
		{"errors on a non-config error", "error.schema.json", `{"error":{"code":"INVALID_JSON","message":"m","errors":["x"]}}`, false},
		{"error without message", "decorate_tools.output.schema.json", `{"error":{"code":"INVALID_JSON"}}`, false},
		{"empty needState", "needstate.schema.json", `{"needState":[]}`, false},
		{"needState with a made-up key", "transition.output.schema.json", `{"needState":["w/s1"]}`, false},
		{"needState and a result", "decorate_tools.output.schema.json", `{"needState":["stategate/v1/w/session//s"],"message":{},"toolNames":[],"hidden":[],"stateDependent":true,"notices":[]}`, false},
		{"decorate_tools without hidden", "decorate_tools.output.schema.json", `{"message":{},"toolNames":[],"stateDependent":true,"notices":[]}`, false},
		{"unknown notice code", "transition.output.schema.json", `{"states":{},"events":[],"visibleChanged":false,"notices":[{"code":"HELLO","workflow":"w","message":"m"}]}`, false},
		{"unknown outcome", "transition.output.schema.json", `{"states":{},"events":[{"workflow":"w","key":"","event":"E","from":"a","to":"b","outcome":"maybe"}],"visibleChanged":false,"notices":[]}`, false},
		{"snapshot seq 0", "snapshot.schema.json", strings.Replace(snap, `"seq":1`, `"seq":0`, 1), false},
		{"snapshot without state", "snapshot.schema.json", strings.Replace(snap, `"state":"a",`, ``, 1), false},
		{"truncated without limitBytes", "decorate_result.output.schema.json", `{"message":{},"invalidated":{"patterns":[],"tools":[]},"truncated":{"originalBytes":1,"droppedItems":0,"structuredContentDropped":false}}`, false},
		{"check_config valid with errors", "check_config.output.schema.json", `{"valid":true,"errors":["x"],"warnings":[],"workflows":[],"host":` + host + `}`, false},
		{"check_config valid without host", "check_config.output.schema.json", `{"valid":true,"errors":[],"warnings":[],"workflows":[],"host":null}`, false},
		{"check_config invalid with host", "check_config.output.schema.json", `{"valid":false,"errors":["x"],"warnings":[],"workflows":[],"host":` + host + `}`, false},
		{"check_config host tool without workflows", "check_config.output.schema.json", `{"valid":true,"errors":[],"warnings":[],"workflows":[],"host":` + strings.Replace(host, `"tools":{}`, `"tools":{"t":{"gated":true,"moves":false,"workflows":[]}}`, 1) + `}`, false},
		{"check_config host principal header in upper case", "check_config.output.schema.json", `{"valid":true,"errors":[],"warnings":[],"workflows":[],"host":` + strings.Replace(host, `"principalHeader":""`, `"principalHeader":"X-User"`, 1) + `}`, false},
		{"check_config valid", "check_config.output.schema.json", `{"valid":true,"errors":[],"warnings":[],"workflows":[],"host":` + host + `}`, true},
		{"allow with approval", "check_limits.output.schema.json", strings.Replace(allow, `"notices"`, `"approval":{"by":"user","message":"m","timeoutMs":1000},"notices"`, 1), true},
		{"approval by nobody", "check_limits.output.schema.json", strings.Replace(allow, `"notices"`, `"approval":{"by":"nobody","message":"m","timeoutMs":1000},"notices"`, 1), false},
		{"approval without message", "check_limits.output.schema.json", strings.Replace(allow, `"notices"`, `"approval":{"by":"user","timeoutMs":1000},"notices"`, 1), false},
		{"denial (control)", "check_limits.output.schema.json", `{"allow":false,"code":"ARRAY_TOO_LARGE","retryable":false,"details":{"tool":"x","path":"a","limit":1,"actual":2,"oversizedArrays":1},"result":` + strings.Replace(strings.Replace(timeout, "TOOL_TIMEOUT", "ARRAY_TOO_LARGE", 1), `"retryable":true,"details":{"tool":"x","timeoutMs":1}`, `"retryable":false,"details":{"tool":"x","path":"a","limit":1,"actual":2,"oversizedArrays":1}`, 1) + `,"notices":[]}`, true},
		{"denial with approval", "check_limits.output.schema.json", `{"allow":false,"code":"ARRAY_TOO_LARGE","retryable":false,"details":{"tool":"x","path":"a","limit":1,"actual":2,"oversizedArrays":1},"result":` + strings.Replace(strings.Replace(timeout, "TOOL_TIMEOUT", "ARRAY_TOO_LARGE", 1), `"retryable":true,"details":{"tool":"x","timeoutMs":1}`, `"retryable":false,"details":{"tool":"x","path":"a","limit":1,"actual":2,"oversizedArrays":1}`, 1) + `,"approval":{"by":"user","message":"m","timeoutMs":1000},"notices":[]}`, false},
		{"input: session not a string", "transition.input.schema.json", `{"tool":"t","session":1}`, false},
		{"input: states an array", "check_limits.input.schema.json", `{"tool":"t","states":[]}`, false},
		{"input: knownTools a string", "decorate_result.input.schema.json", `{"tool":"t","message":{},"knownTools":"a"}`, false},
		{"input: empty tool", "check_limits.input.schema.json", `{"tool":""}`, false},
		{"input: not an object", "decorate_tools.input.schema.json", `[]`, false},
		{"input: unknown member is ignored", "transition.input.schema.json", `{"tool":"t","future":{"x":1}}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.validate(t, c.schema, decode(t, []byte(c.doc)))
			if c.valid && err != nil {
				t.Errorf("%s: %v", c.schema, err)
			}
			if !c.valid && err == nil {
				t.Errorf("%s accepts %s", c.schema, c.doc)
			}
		})
	}
}
