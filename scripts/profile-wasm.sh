#!/usr/bin/env bash
# profile-wasm.sh EXPORT [N] [CONFIG]: profile the engine as TinyGo compiles it to wasm.
#
# wazero has no sampling profiler, so this builds plugin/internal/prof (one export run N
# times on the benchmark inputs) with TinyGo for wasip1, with function names, and runs it
# under Node's WASI with V8's sampling profiler; it prints the functions by self time.
# V8's code is not wazero's, but the engine's code, TinyGo's allocator and collector are
# the same, so the shares point at the same places (docs/performance.md).
#
#   scripts/profile-wasm.sh decorate_tools 400
#   scripts/profile-wasm.sh decorate_result 50
#   scripts/profile-wasm.sh check_limits 50000 abi/testdata/config/annotations.json
set -euo pipefail
cd "$(dirname "$0")/.."
fn=${1:?usage: profile-wasm.sh decorate_tools|decorate_result|check_limits [N] [CONFIG]}
n=${2:-200}
cfg=${3:-abi/testdata/config/sample.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
TINYGO=$(scripts/install-tinygo.sh)
mkdir -p build
cp go.mod build/tinygo.mod && cp go.sum build/tinygo.sum
go mod edit -modfile=build/tinygo.mod -replace github.com/tidwall/pretty="$PWD/plugin/internal/nopretty"
PATH="$(dirname "$(go env GOROOT)/bin/go"):$PATH" GOFLAGS=-modfile=build/tinygo.mod \
  "$TINYGO" build -target=wasip1 -gc=conservative -panic=trap -opt=s -o "$work/prof.wasm" ./plugin/internal/prof
cat >"$work/run.mjs" <<'JS'
import { WASI } from 'node:wasi';
import { readFileSync } from 'node:fs';
const [wasm, root, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: ['prof', ...args], preopens: { '/': root }, returnOnExit: true });
const inst = await WebAssembly.instantiate(await WebAssembly.compile(readFileSync(wasm)), wasi.getImportObject());
const t = performance.now();
wasi.start(inst);
console.error(`${args[0]} x${args[1]}: ${((performance.now() - t) / args[1] * 1000).toFixed(1)} us per call (V8)`);
JS
cat >"$work/top.mjs" <<'JS'
import { readFileSync, readdirSync } from 'node:fs';
const dir = process.argv[2];
const p = JSON.parse(readFileSync(dir + '/' + readdirSync(dir).find(f => f.endsWith('.cpuprofile'))));
const byId = new Map(p.nodes.map(n => [n.id, n]));
const self = new Map();
for (const id of p.samples) {
  const f = byId.get(id).callFrame;
  const k = f.functionName || f.url || '(anonymous)';
  self.set(k, (self.get(k) || 0) + 1);
}
for (const [k, c] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
  console.log((100 * c / p.samples.length).toFixed(1).padStart(5) + '%  ' + k);
}
JS
node --no-warnings --cpu-prof --cpu-prof-dir="$work/prof" --cpu-prof-interval 100 \
  "$work/run.mjs" "$work/prof.wasm" "$PWD" "$fn" "$n" "/$cfg" >/dev/null
node "$work/top.mjs" "$work/prof"
