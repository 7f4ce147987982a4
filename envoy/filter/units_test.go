package filter

import (
	"strings"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

func TestNextEvent(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		eos    bool
		events []string
		rest   string
	}{
		{name: "lf", in: "data: a\n\ndata: b\n\n", events: []string{"data: a\n\n", "data: b\n\n"}},
		{name: "crlf", in: "data: a\r\n\r\nid: 1\r\ndata: b\r\n\r\n", events: []string{"data: a\r\n\r\n", "id: 1\r\ndata: b\r\n\r\n"}},
		{name: "cr", in: "data: a\r\rdata: b\r\r", eos: true, events: []string{"data: a\r\r", "data: b\r\r"}},
		{name: "incomplete_event_is_held", in: "data: a\n\ndata: b\n", events: []string{"data: a\n\n"}, rest: "data: b\n"},
		{name: "trailing_cr_waits_for_its_lf", in: "data: a\r\n\r", events: nil, rest: "data: a\r\n\r"},
		{name: "comment_event", in: ": keepalive\n\n", events: []string{": keepalive\n\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := []byte(tc.in)
			var got []string
			for {
				ev, rest, ok := nextEvent(buf, tc.eos)
				if !ok {
					break
				}
				got = append(got, string(ev))
				buf = rest
			}
			if strings.Join(got, "|") != strings.Join(tc.events, "|") || string(buf) != tc.rest {
				t.Errorf("events %q rest %q; want %q rest %q", got, buf, tc.events, tc.rest)
			}
		})
	}
}

func TestRewriteEvent(t *testing.T) {
	got := string(rewriteEvent(nil, []byte("event: message\r\nid: 4\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"), []byte("{\"b\":\n2}")))
	if want := "event: message\nid: 4\ndata: {\"b\":\ndata: 2}\n\n"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestParseSettings(t *testing.T) {
	if s, err := ParseSettings(nil); err != nil || s != DefaultSettings {
		t.Errorf("empty: %+v %v", s, err)
	}
	s, err := ParseSettings([]byte(`{"maxRequestBodyBytes":10,"holdRequestHeaders":true,"casRetries":2}`))
	if err != nil || s.MaxRequestBodyBytes != 10 || !s.HoldRequestHeaders || s.CASRetries != 2 || s.MaxStateKeys != DefaultSettings.MaxStateKeys {
		t.Errorf("got %+v %v", s, err)
	}
	for _, bad := range []string{`[]`, `{"maxStateKeys":0}`, `{"maxStateKeys":1.5}`, `{"maxStatekeys":1}`, `{"holdRequestHeaders":"yes"}`, `{`} {
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
