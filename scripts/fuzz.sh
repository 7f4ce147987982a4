#!/usr/bin/env bash
# fuzz.sh [FUZZTIME]: run every Fuzz target of the module for FUZZTIME each (default 5s).
# Crashing inputs are kept by go test under the package's testdata/fuzz as regressions.
#
# Go's fuzzer sometimes ends a short run with "context deadline exceeded" and no failing
# input (a shutdown race in the coordinator, not a finding): such a run is tried once more.
# A run that writes a failing input fails at once.
set -euo pipefail
fuzztime=${1:-5s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() { go test "$1" -run '^$' -fuzz="^${2}\$" -fuzztime="$fuzztime" >"$log" 2>&1; }
go list -f '{{.ImportPath}}' ./... | while read -r pkg; do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target ($fuzztime)"
    if run "$pkg" "$target"; then continue; fi
    if ! grep -q 'Failing input written' "$log" && grep -q 'context deadline exceeded' "$log"; then
      echo "fuzz: $target ended with the fuzzer's shutdown race and no finding; running it again"
      run "$pkg" "$target" && continue
    fi
    cat "$log"
    exit 1
  done
done
