package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	wasmfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"

	// Types the bootstrap's Any fields name, registered for protojson.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"

	"github.com/stategate/stategate/envoy/filter"
	"github.com/stategate/stategate/plugin/engine"
)

var sampleConfig = filepath.Join("..", "abi", "testdata", "config", "sample.json")

// checkStategateConfig asserts that doc is a valid stategate configuration (engine.New, as
// the filter's OnPluginStart does) and the same document as the sample configuration.
func checkStategateConfig(t *testing.T, doc []byte) {
	t.Helper()
	if _, err := engine.New(doc); err != nil {
		t.Fatalf("embedded stategate configuration: %v", err)
	}
	want, err := os.ReadFile(sampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	var got, exp any
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("embedded configuration differs from %s", sampleConfig)
	}
}

// TestEnvoyYAML loads envoy/envoy.yaml as Envoy would: YAML to JSON, parsed into the
// Bootstrap proto with every typed_config resolved, then ValidateAll (the proto-validate
// rules Envoy applies). It then checks the filter's own pieces: the wasm filter before
// the router, its VM and plugin configurations, and the upstream.
func TestEnvoyYAML(t *testing.T) {
	raw, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("envoy.yaml does not parse as a Bootstrap: %v", err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml does not validate: %v", err)
	}

	listeners := bs.GetStaticResources().GetListeners()
	if len(listeners) != 1 || len(listeners[0].GetFilterChains()) != 1 {
		t.Fatalf("want one listener with one filter chain")
	}
	var hcm hcmv3.HttpConnectionManager
	if err := listeners[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatalf("http_connection_manager: %v", err)
	}
	filters := hcm.GetHttpFilters()
	if len(filters) != 2 || filters[0].GetName() != "envoy.filters.http.wasm" || filters[1].GetName() != "envoy.filters.http.router" {
		t.Fatalf("http_filters = %v; want the wasm filter, then the router", filters)
	}
	route := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute()
	if route.GetTimeout() == nil || route.GetTimeout().AsDuration() != 0 {
		t.Error("the route must have no timeout (0s): GET SSE streams are long-lived")
	}

	var wasm wasmfilterv3.Wasm
	if err := filters[0].GetTypedConfig().UnmarshalTo(&wasm); err != nil {
		t.Fatalf("wasm filter: %v", err)
	}
	cfg := wasm.GetConfig()
	vm := cfg.GetVmConfig()
	if vm.GetVmId() == "" {
		t.Error("vm_id is empty: shared data is keyed by vm_id, name it")
	}
	if f := vm.GetCode().GetLocal().GetFilename(); f != "build/stategate-envoy.wasm" {
		t.Errorf("code = %q; want the artifact of make build.envoy", f)
	}
	var vmcfg wrapperspb.StringValue
	if err := vm.GetConfiguration().UnmarshalTo(&vmcfg); err != nil {
		t.Fatalf("vm_config.configuration must be a StringValue: %v", err)
	}
	settings, err := filter.ParseSettings([]byte(vmcfg.GetValue()))
	if err != nil {
		t.Fatalf("vm_config.configuration: %v", err)
	}
	if settings.HoldRequestHeaders != cfg.GetAllowOnHeadersStopIteration().GetValue() {
		t.Error("holdRequestHeaders needs allow_on_headers_stop_iteration: true (and only then): Envoy stalls held POSTs otherwise")
	}
	// A buffered answer over Envoy's buffer limit resets its stream before the filter sees
	// its end (proxytest has no such limit): both limits must hold maxResponseBodyBytes.
	if l := listeners[0].GetPerConnectionBufferLimitBytes(); l == nil || int64(l.GetValue()) <= int64(settings.MaxResponseBodyBytes) {
		t.Errorf("listener per_connection_buffer_limit_bytes = %v; want above maxResponseBodyBytes (%d)", l, settings.MaxResponseBodyBytes)
	}
	if l := bs.GetStaticResources().GetClusters()[0].GetPerConnectionBufferLimitBytes(); l == nil || int64(l.GetValue()) <= int64(settings.MaxResponseBodyBytes) {
		t.Errorf("cluster per_connection_buffer_limit_bytes = %v; want above maxResponseBodyBytes (%d)", l, settings.MaxResponseBodyBytes)
	}
	if cfg.GetFailurePolicy().String() != "FAIL_CLOSED" {
		t.Errorf("failure_policy = %v; a failed VM must not bypass the gate", cfg.GetFailurePolicy())
	}
	var plugin wrapperspb.StringValue
	if err := cfg.GetConfiguration().UnmarshalTo(&plugin); err != nil {
		t.Fatalf("configuration must be a StringValue: %v", err)
	}
	checkStategateConfig(t, []byte(plugin.GetValue()))

	clusters := bs.GetStaticResources().GetClusters()
	if len(clusters) != 1 || clusters[0].GetName() != route.GetCluster() {
		t.Fatalf("want one cluster, the route's")
	}
	sa := clusters[0].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != 3001 {
		t.Errorf("upstream = %s:%d; want the demo upstream on 127.0.0.1:3001", sa.GetAddress(), sa.GetPortValue())
	}
}

func loadYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return doc
}

// at walks doc along keys (strings for objects, ints for arrays).
func at(t *testing.T, doc any, keys ...any) any {
	t.Helper()
	cur := doc
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("at %v: not an object", keys)
			}
			cur = m[k]
		case int:
			a, ok := cur.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: not an array of %d+ items", keys, k+1)
			}
			cur = a[k]
		}
	}
	return cur
}

func want(t *testing.T, doc any, value any, keys ...any) {
	t.Helper()
	if got := at(t, doc, keys...); !reflect.DeepEqual(got, value) {
		t.Errorf("%v = %v; want %v", keys, got, value)
	}
}

func configOf(t *testing.T, v any) []byte {
	t.Helper()
	if _, ok := v.(map[string]any); !ok {
		t.Fatalf("the plugin configuration must be an object, got %T", v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEnvoyGatewayExtensionPolicy checks samples/envoy-gateway-extension-policy.yaml: kind,
// apiVersion, the HTTPRoute target, the wasm entry and its stategate configuration.
func TestEnvoyGatewayExtensionPolicy(t *testing.T) {
	doc := loadYAML(t, filepath.Join("samples", "envoy-gateway-extension-policy.yaml"))
	want(t, doc, "gateway.envoyproxy.io/v1alpha1", "apiVersion")
	want(t, doc, "EnvoyExtensionPolicy", "kind")
	want(t, doc, "HTTPRoute", "spec", "targetRefs", 0, "kind")
	want(t, doc, "gateway.networking.k8s.io", "spec", "targetRefs", 0, "group")
	want(t, doc, "Image", "spec", "wasm", 0, "code", "type")
	if u, _ := at(t, doc, "spec", "wasm", 0, "code", "image", "url").(string); !strings.Contains(u, "/envoy-filter:") {
		t.Errorf("spec.wasm[0].code.image.url = %q; want the envoy-filter image `make oci` writes", u)
	}
	want(t, doc, false, "spec", "wasm", 0, "failOpen")
	checkStategateConfig(t, configOf(t, at(t, doc, "spec", "wasm", 0, "config")))
}

// TestIstioWasmPlugin checks samples/istio-wasmplugin.yaml the same way.
func TestIstioWasmPlugin(t *testing.T) {
	doc := loadYAML(t, filepath.Join("samples", "istio-wasmplugin.yaml"))
	want(t, doc, "extensions.istio.io/v1alpha1", "apiVersion")
	want(t, doc, "WasmPlugin", "kind")
	want(t, doc, "HTTP", "spec", "type")
	want(t, doc, "FAIL_CLOSE", "spec", "failStrategy")
	if u, _ := at(t, doc, "spec", "url").(string); !strings.HasPrefix(u, "oci://") || !strings.Contains(u, "/envoy-filter:") {
		t.Errorf("spec.url = %q; want the oci:// envoy-filter image `make oci` writes", u)
	}
	if at(t, doc, "spec", "selector", "matchLabels") == nil {
		t.Error("spec.selector.matchLabels is empty: the plugin would apply to every workload")
	}
	checkStategateConfig(t, configOf(t, at(t, doc, "spec", "pluginConfig")))
}
