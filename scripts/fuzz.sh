#!/usr/bin/env bash
# fuzz.sh [--keep-going] [FUZZTIME [TARGETS]]: run every Fuzz target of the module (found
# with `go test -list`, so a new target is picked up by itself) for FUZZTIME each
# (default 5s), printing the executions of each, then a summary.
#
#   TARGETS            a regular expression on "package/FuzzName" (default: every target)
#   --keep-going       run every target even after one fails (make fuzz.long); the exit
#                      status is still 1 when any failed
#   FUZZMINIMIZETIME   how long the fuzzer may minimise an input (default 100x: a hundred
#                      runs). Go's default of 60s lets targets with large inputs spend most
#                      of a run minimising every new interesting input at a few executions
#                      a second (FuzzTruncate: 17 executions in 30 s, against 280,000).
#
# A failing input is written by go test under the package's testdata/fuzz/<FuzzName>/ and
# stays there as a regression case (commit it with the fix); the summary lists them.
#
# Go's fuzzer sometimes ends a short run with "context deadline exceeded" and no failing
# input (a shutdown race in the coordinator, not a finding): such a run is tried once more.
set -euo pipefail
keep_going=0
if [[ ${1:-} == --keep-going ]]; then
  keep_going=1
  shift
fi
fuzztime=${1:-5s}
match=${2:-.}
minimize=${FUZZMINIMIZETIME:-100x}
log=$(mktemp)
summary=$(mktemp)
trap 'rm -f "$log" "$summary"' EXIT

run() {
  go test "$1" -run '^$' -fuzz="^${2}\$" -fuzztime="$fuzztime" -fuzzminimizetime="$minimize" >"$log" 2>&1
}

# execs prints the last execution count the fuzzer reported.
execs() {
  grep -o 'execs: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2 || true
}

failed=0
for pkg in $(go list -f '{{.ImportPath}}' ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    [[ "$pkg/$target" =~ $match ]] || continue
    echo "fuzz: $pkg $target ($fuzztime)"
    status=ok
    if ! run "$pkg" "$target"; then
      if ! grep -q 'Failing input written' "$log" && grep -q 'context deadline exceeded' "$log"; then
        echo "fuzz: $target ended with the fuzzer's shutdown race and no finding; running it again"
        run "$pkg" "$target" || status=FAIL
      else
        status=FAIL
      fi
    fi
    n=$(execs)
    printf '%-12s %-28s %12s  %s\n' "$status" "$target" "${n:-?}" "$pkg" >>"$summary"
    echo "fuzz: $target: ${n:-?} executions, $status"
    if [[ $status == FAIL ]]; then
      failed=1
      cat "$log"
      grep 'Failing input written to' "$log" | sed "s|.*written to |fuzz: kept as a regression input: $(go list -f '{{.Dir}}' "$pkg")/|" || true
      ((keep_going)) || exit 1
    fi
  done
done
echo
echo "fuzz summary ($fuzztime per target):"
printf '%-12s %-28s %12s  %s\n' result target executions package
cat "$summary"
exit $failed
