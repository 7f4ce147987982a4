#!/usr/bin/env bash
# install-traefik.sh - build Traefik from the Go module proxy, for the tests that run the
# http-wasm build of the exchange core in it (httpwasm/, examples/traefik). Never committed.
#
# github.com/traefik/traefik/v3@v3.6.12 builds from the proxy as it is (v3.7.x pulls modules
# the proxy refuses). The module zip lacks the web UI that `//go:embed static` wants, so a
# placeholder webui/static/index.html is written; nothing else is changed. About 10 minutes on
# two cores, a 245 MB binary.
#
# Usage:   TRAEFIK=$(scripts/install-traefik.sh)
# Env:     TRAEFIK_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/stategate/traefik)
#          TRAEFIK_NO_BUILD  when set, fail instead of building (tests: a missing binary is
#                         reported, not built for 10 minutes inside a test)
#          GO             go binary to build with (default: go in PATH, else /usr/local/go/bin/go)
# Output:  the path of the binary is the only line on stdout; logging goes to stderr.
# Idempotent: when the binary is in place it exits at once, without the network.
set -euo pipefail

VERSION=v3.6.12
MODULE=github.com/traefik/traefik/v3

CACHE="${TRAEFIK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stategate/traefik}"
DIR="$CACHE/$VERSION"
BIN="$DIR/traefik"

NAME=traefik
# shellcheck source=proxy-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/proxy-build.sh"

# The binary is written last, by a rename, so its presence means a finished build.
if [[ -x "$BIN" ]]; then
	printf '%s\n' "$BIN"
	exit 0
fi

[[ -z "${TRAEFIK_NO_BUILD:-}" ]] || die "traefik $VERSION is not built: run \`make traefik\` (about 10 min once)"

proxy_fetch
mkdir -p "$work/src/webui/static"
[[ -f "$work/src/webui/static/index.html" ]] ||
	printf '<!doctype html><title>Traefik</title><p>web UI not built (stategate test build)</p>\n' >"$work/src/webui/static/index.html"

log "building traefik $VERSION (about 10 min on an idle 2-core machine)"
start=$SECONDS
(cd "$work/src" && GOFLAGS=-mod=mod "$GO" build -trimpath -ldflags=-s -o "$work/traefik" ./cmd/traefik) >&2 ||
	die "go build ./cmd/traefik failed (see above)"
proxy_install "$work/traefik" version
