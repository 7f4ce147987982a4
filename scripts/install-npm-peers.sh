#!/usr/bin/env bash
# install-npm-peers.sh - install the npm MCP proxies the side-by-side benchmark runs
# (testharness/peers): supergateway and mcp-proxy, at pinned versions, with the machine's
# Node.js and npm, into a cache outside the repository. Never committed.
#
# Usage:   DIR=$(scripts/install-npm-peers.sh)   # then $DIR/node_modules/.bin/{supergateway,mcp-proxy}
# Env:     NPM_PEERS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/stategate/npm-peers)
# Output:  the install directory is the only line on stdout; logging goes to stderr.
# Idempotent: when both are in place it exits at once, without the network.
set -euo pipefail

PACKAGES=(supergateway@4.0.0 mcp-proxy@6.7.19)
KEY=supergateway-4.0.0_mcp-proxy-6.7.19

CACHE="${NPM_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stategate/npm-peers}"
DIR="$CACHE/$KEY"

log() { printf 'install-npm-peers: %s\n' "$*" >&2; }
die() { printf 'install-npm-peers: ERROR: %s\n' "$*" >&2; exit 1; }

if [[ -f "$DIR/.done" ]]; then
	printf '%s\n' "$DIR"
	exit 0
fi
command -v npm >/dev/null || die "npm not found"
mkdir -p "$DIR"
log "installing ${PACKAGES[*]} into $DIR"
(cd "$DIR" && [[ -f package.json ]] || printf '{"private":true}\n' >"$DIR/package.json")
(cd "$DIR" && npm install --no-audit --no-fund --save-exact "${PACKAGES[@]}") >&2 || die "npm install failed"
[[ -x "$DIR/node_modules/.bin/supergateway" && -x "$DIR/node_modules/.bin/mcp-proxy" ]] || die "binaries missing after install"
touch "$DIR/.done"
printf '%s\n' "$DIR"
