#!/usr/bin/env bash
# e2e.envoy: real Envoy (envoy/envoy.yaml, build/stategate-envoy.wasm) in front of the
# standalone demo upstream on 127.0.0.1:3001, driven over HTTP with curl.
#
# Skips (exit 0, with a message) when no `envoy` binary is on PATH: none can be installed on
# this project's machine kind, and proxytest (go test ./envoy/...) covers the filter up to the
# Envoy boundary. Set STATEGATE_REQUIRE_ENVOY=1 to make a missing Envoy a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
ENVOY=${ENVOY:-envoy}
URL=http://127.0.0.1:8080/mcp
MIN_MAJOR=1 MIN_MINOR=39

if ! command -v "$ENVOY" >/dev/null 2>&1; then
  msg="e2e.envoy: SKIPPED: no '$ENVOY' binary on PATH. Install Envoy >= $MIN_MAJOR.$MIN_MINOR (the filter is built with Go >= 1.25) and rerun; go test ./envoy/... covers the filter under proxytest."
  if [[ "${STATEGATE_REQUIRE_ENVOY:-}" == 1 ]]; then echo "$msg" >&2; exit 1; fi
  echo "$msg"
  exit 0
fi

version=$("$ENVOY" --version | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
IFS=. read -r major minor _ <<<"$version"
if (( major < MIN_MAJOR || (major == MIN_MAJOR && minor < MIN_MINOR) )); then
  echo "e2e.envoy: Envoy $version is too old: Go >= 1.25 wasm modules need Envoy >= $MIN_MAJOR.$MIN_MINOR (envoyproxy/envoy#45756)" >&2
  exit 1
fi
test -f build/stategate-envoy.wasm || { echo "e2e.envoy: build/stategate-envoy.wasm is missing: run make build.envoy" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

wait_for() { # url, what
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.2
  done
  echo "e2e.envoy: $2 did not come up; logs in $work" >&2
  cat "$work"/*.log >&2 || true
  exit 1
}

"$GO" build -o "$work/stategate" ./host/cmd/stategate
"$work/stategate" demo --upstream-only --listen 127.0.0.1:3001 >"$work/upstream.log" 2>&1 &
pids+=($!)
wait_for http://127.0.0.1:3001/ "the demo upstream"

"$ENVOY" -c envoy/envoy.yaml --log-level warn >"$work/envoy.log" 2>&1 &
pids+=($!)
wait_for http://127.0.0.1:9901/ready "envoy"

fail=0
check() { # name, body, pattern
  if grep -qE -- "$3" <<<"$2"; then echo "ok   $1"; else echo "FAIL $1: want /$3/ in: $2"; fail=1; fi
}
post() { # body [session]
  curl -s -D "$work/headers" -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-06-18' \
    ${2:+-H "mcp-session-id: $2"} --data "$1" "$URL"
}

init=$(post '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}')
check "initialize advertises listChanged" "$init" '"listChanged":true'
sid=$(grep -i '^mcp-session-id:' "$work/headers" | tr -d '\r' | awk '{print $2}')
post '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$sid" >/dev/null

list=$(post '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' "$sid")
check "tools/list is decorated" "$list" 'Cache-Control: '
if grep -q '"name":"cart.pay"' <<<"$list"; then echo "FAIL tools/list shows cart.pay in state empty"; fail=1; else echo "ok   tools/list hides cart.pay in state empty"; fi

pay=$(post '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"cart.pay","arguments":{}}}' "$sid")
check "cart.pay is denied by the gate" "$pay" 'TOOL_NOT_AVAILABLE'

add=$(post '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"book"}}}' "$sid")
if grep -q 'TOOL_NOT_AVAILABLE' <<<"$add"; then echo "FAIL cart.add_item denied: $add"; fail=1; else echo "ok   cart.add_item reaches the upstream"; fi

big=$(post "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"bulk.import\",\"arguments\":{\"rows\":[\"$(head -c 1100000 /dev/zero | tr '\0' 'x')\"]}}}" "$sid")
check "an oversized body is a JSON-RPC error" "$big" 'maxRequestBodyBytes'

curl -s -o /dev/null -X DELETE -H "mcp-session-id: $sid" "$URL"
pay=$(post '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"cart.checkout","arguments":{}}}' "$sid")
check "DELETE cleared the session's state" "$pay" 'TOOL_NOT_AVAILABLE|Session not found|session'

if (( fail )); then echo "e2e.envoy: FAILED (logs: envoy $work/envoy.log)"; cat "$work/envoy.log"; exit 1; fi
echo "e2e.envoy: passed against Envoy $version"
