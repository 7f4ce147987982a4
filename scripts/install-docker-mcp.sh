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

NAME=docker-mcp
# shellcheck source=proxy-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/proxy-build.sh"

# The binary is written last, by a rename, so its presence means a finished build.
if [[ -x "$BIN" ]]; then
	printf '%s\n' "$BIN"
	exit 0
fi

proxy_fetch
args=()
for r in "${REQUIRES[@]}"; do args+=("-require=$r"); done
(cd "$work/src" && "$GO" mod edit "${args[@]}") || die "go mod edit failed"

log "building docker-mcp $VERSION (about 1.5 min on an idle 2-core machine)"
start=$SECONDS
(cd "$work/src" && "$GO" build -mod=mod -trimpath -ldflags=-s -o "$work/docker-mcp" ./cmd/docker-mcp) >&2 ||
	die "go build ./cmd/docker-mcp failed (see above)"
proxy_install "$work/docker-mcp" gateway run --help
