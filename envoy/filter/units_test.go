package filter

import (
	"reflect"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

func TestParseSettings(t *testing.T) {
	if s, err := ParseSettings(nil); err != nil || !reflect.DeepEqual(s, DefaultSettings) {
		t.Errorf("empty: %+v %v", s, err)
	}
	s, err := ParseSettings([]byte(`{"maxRequestBodyBytes":10,"holdRequestHeaders":true,"casRetries":2,"allowedOrigins":["https://a.example"]}`))
	if err != nil || s.MaxRequestBodyBytes != 10 || !s.HoldRequestHeaders || s.CASRetries != 2 || s.MaxStateKeys != DefaultSettings.MaxStateKeys ||
		len(s.AllowedOrigins) != 1 || s.AllowedOrigins[0] != "https://a.example" {
		t.Errorf("got %+v %v", s, err)
	}
	if s, err := ParseSettings([]byte(`{"publicUrl":"https://MCP.example.com/"}`)); err != nil || s.PublicURL != "https://MCP.example.com" {
		t.Errorf("publicUrl: %+v %v", s, err)
	}
	if s, err := ParseSettings([]byte(`{"gcHeapMiB":0}`)); err != nil || s.GCHeapMiB != 0 || DefaultSettings.GCHeapMiB != 64 {
		t.Errorf("gcHeapMiB 0 (Go's default): %+v %v", s, err)
	}
	for _, bad := range []string{`{"gcHeapMiB":-1}`, `{"gcHeapMiB":"64"}`, `{"gcHeapMiB":1e9}`, `[]`, `{"maxStateKeys":0}`, `{"maxStateKeys":1.5}`, `{"maxStatekeys":1}`, `{"holdRequestHeaders":"yes"}`, `{`, `{"allowedOrigins":"*"}`, `{"allowedHosts":[""]}`,
		`{"publicUrl":"https://mcp.example.com/mcp"}`, `{"publicUrl":"mcp.example.com"}`, `{"publicUrl":5}`} {
		if _, err := ParseSettings([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestPluginStart_errors: a configuration the engine rejects, or bad VM settings, fail the
// start, so Envoy refuses the listener instead of serving without the gate.
func TestPluginStart_errors(t *testing.T) {
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			for _, tc := range []struct{ name, config, vmConfig string }{
				{"invalid_config", `{"version":1,"workflows":[{"id":"x"}]}`, ""},
				{"missing_config", "", ""},
				{"bad_vm_configuration", string(sampleConfig), `{"maxStateKeys":-1}`},
			} {
				t.Run(tc.name, func(t *testing.T) {
					opt := proxytest.NewEmulatorOption().WithVMContext(r.vm(t)).WithPluginConfiguration([]byte(tc.config)).WithVMConfiguration([]byte(tc.vmConfig))
					host, reset := proxytest.NewHostEmulator(opt)
					defer reset()
					if host.StartVM() == types.OnVMStartStatusOK && host.StartPlugin() == types.OnPluginStartStatusOK {
						t.Fatal("started")
					}
					if len(host.GetCriticalLogs()) == 0 {
						t.Error("no critical log says why")
					}
				})
			}
		})
	}
}
