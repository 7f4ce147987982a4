#!/usr/bin/env bash
# e2e.envoy: a proxy running the filter in front of the standalone demo upstream, driven over
# HTTP with curl.
#
#   envoy/e2e.sh            real Envoy (envoy/envoy.yaml, build/stategate-envoy.wasm), started
#                           here, on http://127.0.0.1:8080/mcp, the upstream on 127.0.0.1:3001
#   envoy/e2e.sh URL        any proxy already running the filter at URL (or STATEGATE_E2E_URL),
#                           forwarding to the upstream this script starts on
#                           STATEGATE_E2E_UPSTREAM (default 127.0.0.1:3001): the mosn test
#                           host does (envoy/mosnhost, TestE2EScript)
#
# Without a URL it skips (exit 0, with a message) when no `envoy` binary is on PATH: none can
# be installed on this project's machine kind, and proxytest (go test ./envoy/...) covers the
# filter up to the Envoy boundary. Set STATEGATE_REQUIRE_ENVOY=1 to make a missing Envoy a
# failure. Bodies go from files (curl --data-binary @FILE): the oversized one is over 1 MiB,
# more than one command-line argument may hold (128 KiB on Linux).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
ENVOY=${ENVOY:-envoy}
URL=${1:-${STATEGATE_E2E_URL:-}}
UPSTREAM=${STATEGATE_E2E_UPSTREAM:-127.0.0.1:3001}
MIN_MAJOR=1 MIN_MINOR=39
proxy="the proxy at $URL"

if [[ -z "$URL" ]]; then
  URL=http://127.0.0.1:8080/mcp
  if ! command -v "$ENVOY" >/dev/null 2>&1; then
    msg="e2e.envoy: SKIPPED: no '$ENVOY' binary on PATH. Install Envoy >= $MIN_MAJOR.$MIN_MINOR (the filter is built with Go >= 1.25) and rerun, or pass the URL of another proxy running the filter; go test ./envoy/... covers the filter under proxytest and in mosn's host."
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
  proxy="Envoy $version"
fi

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
"$work/stategate" demo --upstream-only --listen "$UPSTREAM" >"$work/upstream.log" 2>&1 &
pids+=($!)
wait_for "http://$UPSTREAM/" "the demo upstream"

if [[ "$proxy" == Envoy* ]]; then
  "$ENVOY" -c envoy/envoy.yaml --log-level warn >"$work/envoy.log" 2>&1 &
  pids+=($!)
  wait_for http://127.0.0.1:9901/ready "envoy"
fi

fail=0
check() { # name, body, pattern
  if grep -qE -- "$3" <<<"$2"; then echo "ok   $1"; else echo "FAIL $1: want /$3/ in: $2"; fail=1; fi
}
status() { # the status of the last answer
  head -1 "$work/headers" | awk '{print $2}'
}
n=0
post() { # body [session]: the body goes from a file
  n=$((n + 1))
  printf '%s' "$1" >"$work/body-$n.json"
  post_file "$work/body-$n.json" "${2:-}"
}
post_file() { # file [session]
  curl -s -D "$work/headers" -H 'Expect:' -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-06-18' \
    ${2:+-H "mcp-session-id: $2"} --data-binary "@$1" "$URL"
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

# Over maxRequestBodyBytes (1 MiB in envoy.yaml): refused by the filter with the exchange
# core's answer (exchange/admission): 413, JSON-RPC -32600, the request's id.
{
  printf '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bulk.import","arguments":{"rows":["'
  head -c 1100000 /dev/zero | tr '\0' 'x'
  printf '"]}}}'
} >"$work/big.json"
big=$(post_file "$work/big.json" "$sid")
check "an oversized body is answered 413" "$(status)" '^413$'
check "an oversized body is a JSON-RPC error -32600 for its id" "$big" '"id":5,"error":\{"code":-32600,"message":"request body over the gateway.s limit of 1048576 bytes"'

curl -s -o /dev/null -X DELETE -H "mcp-session-id: $sid" "$URL"
pay=$(post '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"cart.checkout","arguments":{}}}' "$sid")
check "DELETE cleared the session's state" "$pay" 'TOOL_NOT_AVAILABLE|Session not found|session'

if (( fail )); then
  echo "e2e.envoy: FAILED against $proxy (logs below)"
  cat "$work"/*.log || true
  exit 1
fi
echo "e2e.envoy: passed against $proxy"
