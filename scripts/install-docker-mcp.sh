#!/usr/bin/env bash
# install-docker-mcp.sh - build Docker's MCP gateway (docker-mcp) from the Go module proxy, for
# the end-to-end tests behind it (host/intercept, host/cmd/stategate). Never committed.
#
# github.com/docker/mcp-gateway@v0.43.3 pins github.com/docker/secrets-engine/client@v0.0.29,
# which the proxy refuses; the versions its later commits use (client v0.0.30,
# x v0.2.2-do.not.use) are required instead. Nothing else is changed.
#
# Usage:   DOCKER_MCP=$(scripts/install-docker-mcp.sh)
# Env:     DOCKER_MCP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/stategate/docker-mcp)
#          GO                go binary to build with (default: go in PATH, else /usr/local/go/bin/go)
# Output:  the path of the binary is the only line on stdout; logging goes to stderr.
# Idempotent: when the binary is in place it exits at once, without the network.
set -euo pipefail

VERSION=v0.43.3
MODULE=github.com/docker/mcp-gateway
REQUIRES=(
	github.com/docker/secrets-engine/client@v0.0.30
	github.com/docker/secrets-engine/x@v0.2.2-do.not.use
)

CACHE="${DOCKER_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stategate/docker-mcp}"
DIR="$CACHE/$VERSION"
BIN="$DIR/docker-mcp"

log() { printf 'install-docker-mcp: %s\n' "$*" >&2; }
die() { printf 'install-docker-mcp: ERROR: %s\n' "$*" >&2; exit 1; }

# The binary is written last, by a rename, so its presence means a finished build.
if [[ -x "$BIN" ]]; then
	printf '%s\n' "$BIN"
	exit 0
fi

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
args=()
for r in "${REQUIRES[@]}"; do args+=("-require=$r"); done
(cd "$work/src" && "$GO" mod edit "${args[@]}") || die "go mod edit failed"

log "building docker-mcp $VERSION (about 1.5 min on an idle 2-core machine)"
start=$SECONDS
(cd "$work/src" && "$GO" build -mod=mod -trimpath -ldflags=-s -o "$work/docker-mcp" ./cmd/docker-mcp) >&2 ||
	die "go build ./cmd/docker-mcp failed (see above)"
"$work/docker-mcp" gateway run --help >/dev/null 2>&1 || die "the built docker-mcp does not run"
mv -f "$work/docker-mcp" "$BIN"
log "docker-mcp $VERSION ready in $((SECONDS - start)) s: $BIN ($(du -h "$BIN" | cut -f1))"
printf '%s\n' "$BIN"
