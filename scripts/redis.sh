#!/usr/bin/env bash
# redis.sh - a throwaway redis-server for tests: loopback only, no persistence, daemonized.
#
# Usage:   scripts/redis.sh install            install redis-server (Debian) if missing
#          scripts/redis.sh start PORT [DIR]   start on 127.0.0.1:PORT; returns once PING answers
#          scripts/redis.sh stop PORT          shut the server on 127.0.0.1:PORT down
# DIR holds the pid and log files (default: a new temporary directory).
# Idempotent: install does nothing when redis-server is on PATH; start does nothing when a
# server already answers on PORT; stop does nothing when none does.
set -euo pipefail

die() { echo "redis.sh: $*" >&2; exit 1; }

install() {
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return
	local sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || die "redis-server is missing and installing it needs root"
		sudo=(sudo)
	fi
	echo "redis.sh: installing redis-server with apt-get" >&2
	"${sudo[@]}" apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends redis-server >&2
	command -v redis-server >/dev/null || die "redis-server still missing after apt-get install"
}

ping() { [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; }

start() {
	local port=$1 dir=${2:-}
	install
	ping "$port" && return
	[ -n "$dir" ] || dir=$(mktemp -d "${TMPDIR:-/tmp}/stategate-redis.XXXXXX")
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes \
		--daemonize yes --pidfile "$dir/redis-$port.pid" --logfile "$dir/redis-$port.log" \
		--dir "$dir" --save '' --appendonly no >&2 || die "redis-server failed to start on port $port"
	for _ in $(seq 100); do
		ping "$port" && return
		sleep 0.1
	done
	tail -n 20 "$dir/redis-$port.log" >&2 || true
	die "redis-server on port $port did not answer PING within 10s (log: $dir/redis-$port.log)"
}

stop() {
	local port=$1
	command -v redis-cli >/dev/null || return 0
	ping "$port" || return 0
	redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
	for _ in $(seq 50); do
		ping "$port" || return 0
		sleep 0.1
	done
	die "redis-server on port $port did not stop"
}

port_arg() {
	[[ ${1:-} =~ ^[0-9]+$ ]] || die "PORT must be a number, got '${1:-}'"
}

case "${1:-}" in
install) install ;;
start) port_arg "${2:-}"; start "$2" "${3:-}" ;;
stop) port_arg "${2:-}"; stop "$2" ;;
*) die "usage: $0 install | start PORT [DIR] | stop PORT" ;;
esac
