#!/usr/bin/env bash
# check-size.sh FILE MAX: fail when FILE is larger than MAX bytes (the module size budget).
set -euo pipefail
size=$(stat -c %s "$1")
if (( size > $2 )); then
  echo "size budget: $1 is $size bytes, over the budget of $2" >&2
  exit 1
fi
echo "$1: $size bytes (budget $2)" >&2
