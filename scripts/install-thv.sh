#!/usr/bin/env bash
# install-thv.sh - build ToolHive's thv (github.com/stacklok/toolhive) from the Go module
# proxy, for the side-by-side benchmark (testharness/peers: `thv proxy` in front of a remote
# server). Never committed.
#
# thv v0.47.0 needs a newer Go than the machine's: it is built with GOTOOLCHAIN=go1.27.3,
# which the go command takes from the Go module proxy like any module. It runs with
# TOOLHIVE_RUNTIME=kubernetes (no container runtime is asked for by `thv proxy`).
#
# Usage:   THV=$(scripts/install-thv.sh)
# Env:     THV_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/stategate/thv)
#          GO         go binary to build with (default: go in PATH, else /usr/local/go/bin/go)
# Output:  the path of the binary is the only line on stdout; logging goes to stderr.
# Idempotent: when the binary is in place it exits at once, without the network.
set -euo pipefail

VERSION=v0.47.0
MODULE=github.com/stacklok/toolhive
TOOLCHAIN=go1.27.3

CACHE="${THV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stategate/thv}"
DIR="$CACHE/$VERSION"
BIN="$DIR/thv"

NAME=thv
# shellcheck source=proxy-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/proxy-build.sh"

if [[ -x "$BIN" ]]; then
	printf '%s\n' "$BIN"
	exit 0
fi

proxy_fetch
export GOTOOLCHAIN="$TOOLCHAIN"

log "building thv $VERSION with $TOOLCHAIN (several minutes on a 2-core machine)"
start=$SECONDS
(cd "$work/src" && "$GO" build -mod=mod -trimpath -ldflags=-s -o "$work/thv" ./cmd/thv) >&2 ||
	die "go build ./cmd/thv failed (see above)"
# thv looks for a container runtime as it starts, even for its version; the benchmark runs it
# with TOOLHIVE_RUNTIME=kubernetes, and so does this check.
export TOOLHIVE_RUNTIME=kubernetes TOOLHIVE_SKIP_UPDATE_CHECK=true
"$work/thv" version >&2 || die "the built thv does not run (see above)"
proxy_install "$work/thv" version
