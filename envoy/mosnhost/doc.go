// Package mosnhost runs the Envoy filter (build/stategate-envoy.wasm) in a proxy-wasm host
// nobody here wrote: mosn.io/proxy-wasm-go-host v0.2.0, MOSN's host library, on wasmer
// (wasmer-go v1.0.4 through cgo), as a small HTTP proxy with an upstream and shared data.
// The filter has otherwise only met the proxy-wasm Go SDK's own emulator (proxytest).
//
// # Notes
//
//   - Shims, all on the host's side, each making mosn do what Envoy does: mosn knows
//     proxy_send_http_response (the ABI's earlier name) but not proxy_send_local_response,
//     which the filter imports (the same eight i32 parameters: one implementation under
//     both names); mosn starts a module with `_start`, which a reactor lacks, so the module
//     gets a `_start` export naming its `_initialize` (internal/wasmexport); a module without
//     `malloc` (the standard-Go build) gets one naming `proxy_on_memory_allocate`; an empty
//     value is copied with no allocation (mosn would ask the guest for 0 bytes, which the
//     SDK's allocator cannot give); and wasmer's WASI poll_oneoff, which panics (aborting
//     the process) on the clock subscriptions the standard-Go runtime makes, is replaced.
//   - mosn folds repeated headers: proxy_get_header_map_pairs hands the guest one pair per
//     name. The filter's defence against a repeated identity header cannot see the second
//     line here; the exchange suite's cases that need it are left out, saying so.
//   - The export's result is read directly (mosn's ABIContext answers its import handler's
//     Wait() instead of the guest's action); shared data and metrics are the proxy's own,
//     with Envoy's rules (sharedData).
//   - Everything needs cgo (wasmer-go links libwasmer.so, shipped in its module); without
//     cgo the package is empty and its tests say so.
package mosnhost
