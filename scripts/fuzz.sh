#!/usr/bin/env bash
# fuzz.sh [FUZZTIME]: run every Fuzz target of the module for FUZZTIME each (default 5s).
# Crashing inputs are kept by go test under the package's testdata/fuzz as regressions.
set -euo pipefail
fuzztime=${1:-5s}
go list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target ($fuzztime)"
    go test "$pkg" -run '^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" >/tmp/fuzz.$$.log 2>&1 || {
      cat /tmp/fuzz.$$.log; rm -f /tmp/fuzz.$$.log; exit 1; }
  done
done
rm -f /tmp/fuzz.$$.log
