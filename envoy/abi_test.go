package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/stategate/stategate/internal/testenv"
)

// hostFunctions are the proxy-wasm functions the filter imports (module "env"), as
// docs/envoy.md "What the filter needs of a host" lists them: all of ABI 0.2.0.
var hostFunctions = []string{
	"proxy_log", "proxy_set_effective_context", "proxy_define_metric", "proxy_increment_metric",
	"proxy_get_buffer_bytes", "proxy_set_buffer_bytes",
	"proxy_get_header_map_pairs", "proxy_set_header_map_pairs", "proxy_replace_header_map_value", "proxy_remove_header_map_value",
	"proxy_send_local_response", "proxy_get_shared_data", "proxy_set_shared_data",
}

// guestExports are the exports a host calls.
var guestExports = []string{
	"proxy_abi_version_0_2_0", "_initialize", "memory", "proxy_on_memory_allocate",
	"proxy_on_context_create", "proxy_on_vm_start", "proxy_on_configure",
	"proxy_on_request_headers", "proxy_on_request_body", "proxy_on_request_trailers",
	"proxy_on_response_headers", "proxy_on_response_body", "proxy_on_response_trailers",
	"proxy_on_done", "proxy_on_log", "proxy_on_delete",
}

// TestModuleABI holds the built modules and docs/envoy.md to one contract: the ABI
// version they declare, the host functions they import, the exports a host calls, and (the
// TinyGo module) `malloc` naming proxy_on_memory_allocate, so that Envoy's copies into the
// guest are collected (envoy.mk).
func TestModuleABI(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "envoy.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	if i := strings.Index(section, "## What the filter needs of a host"); i >= 0 {
		section = section[i:]
		if j := strings.Index(section[3:], "\n## "); j >= 0 {
			section = section[:j+3]
		}
	} else {
		t.Fatal(`docs/envoy.md has no section "What the filter needs of a host"`)
	}
	for _, name := range append(append([]string{}, hostFunctions...), guestExports...) {
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("docs/envoy.md's host section does not name `%s`", name)
		}
	}
	for _, m := range []struct{ path, make string }{
		{filepath.Join("..", "build", "stategate-envoy.wasm"), "make build.envoy"},
		{filepath.Join("..", "build", "stategate-envoy-go.wasm"), "make build.envoy.go"},
	} {
		t.Run(filepath.Base(m.path), func(t *testing.T) {
			testenv.NeedFile(t, m.path, "run `"+m.make+"`")
			b, err := os.ReadFile(m.path)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter()) // decoding and validation only
			defer r.Close(ctx)
			mod, err := r.CompileModule(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			var env []string
			for _, f := range mod.ImportedFunctions() {
				if module, name, _ := f.Import(); module == "env" {
					env = append(env, name)
				} else if module != "wasi_snapshot_preview1" {
					t.Errorf("imports %s.%s: neither proxy-wasm nor WASI", module, name)
				}
			}
			slices.Sort(env)
			want := slices.Sorted(slices.Values(hostFunctions))
			if !slices.Equal(env, want) {
				t.Errorf("proxy-wasm imports\n got %v\nwant %v (docs/envoy.md)", env, want)
			}
			exports := mod.ExportedFunctions()
			for _, name := range guestExports {
				if _, ok := exports[name]; !ok && name != "memory" {
					t.Errorf("no export %s", name)
				}
			}
			if _, ok := mod.ExportedMemories()["memory"]; !ok {
				t.Error("no exported memory")
			}
			for name := range exports {
				if strings.HasPrefix(name, "proxy_abi_version_") && name != "proxy_abi_version_0_2_0" {
					t.Errorf("declares %s besides proxy_abi_version_0_2_0", name)
				}
			}
			if malloc, ok := exports["malloc"]; ok {
				if alloc := exports["proxy_on_memory_allocate"]; malloc.Index() != alloc.Index() {
					t.Errorf("malloc is function %d, proxy_on_memory_allocate %d: Envoy allocates with malloc, and TinyGo's keeps every block until free, which Envoy never calls", malloc.Index(), alloc.Index())
				}
			}
		})
	}
}
