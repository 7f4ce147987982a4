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

log() { printf 'install-traefik: %s\n' "$*" >&2; }
die() { printf 'install-traefik: ERROR: %s\n' "$*" >&2; exit 1; }

# The binary is written last, by a rename, so its presence means a finished build.
if [[ -x "$BIN" ]]; then
	printf '%s\n' "$BIN"
	exit 0
fi

[[ -z "${TRAEFIK_NO_BUILD:-}" ]] || die "traefik $VERSION is not built: run \`make traefik\` (about 10 min once)"

GO="${GO:-$(command -v go || true)}"
if [[ -z "$GO" && -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go; fi
[[ -n "$GO" ]] || die "no Go toolchain found (set GO=)"

mkdir -p "$DIR"
work="$(mktemp -d "$DIR/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export GOTOOLCHAIN=local GO111MODULE=on GOFLAGS=-buildvcs=false CGO_ENABLED=0

log "downloading $MODULE@$VERSION from the Go module proxy"
json="$(cd "$work" && "$GO" mod download -json "$MODULE@$VERSION")" ||
	die "go mod download $MODULE@$VERSION failed (GOPROXY=$("$GO" env GOPROXY))"
src="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$src" && -f "$src/go.mod" ]] || die "could not find the downloaded module in: $json"

cp -R "$src/." "$work/src"
chmod -R u+w "$work/src"
mkdir -p "$work/src/webui/static"
[[ -f "$work/src/webui/static/index.html" ]] ||
	printf '<!doctype html><title>Traefik</title><p>web UI not built (stategate test build)</p>\n' >"$work/src/webui/static/index.html"

log "building traefik $VERSION (about 10 min on an idle 2-core machine)"
start=$SECONDS
(cd "$work/src" && GOFLAGS=-mod=mod "$GO" build -trimpath -ldflags=-s -o "$work/traefik" ./cmd/traefik) >&2 ||
	die "go build ./cmd/traefik failed (see above)"
"$work/traefik" version >/dev/null 2>&1 || die "the built traefik does not run"
mv -f "$work/traefik" "$BIN"
log "traefik $VERSION ready in $((SECONDS - start)) s: $BIN ($(du -h "$BIN" | cut -f1))"
printf '%s\n' "$BIN"
