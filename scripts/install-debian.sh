#!/usr/bin/env bash
# install-debian.sh - install Debian packages the tests need, when missing.
#
# Usage:   scripts/install-debian.sh PACKAGE...
# Idempotent: does nothing when every package is installed. As root it runs apt-get
# directly, otherwise through sudo; without either it fails naming what is missing.
# `make test` uses it for chromium (the status page's browser tests); redis-server comes
# from scripts/redis.sh when a Redis test starts it.
set -euo pipefail

missing=()
for p in "$@"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
((${#missing[@]})) || exit 0
sudo=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "install-debian.sh: ${missing[*]} missing and installing needs root" >&2; exit 1; }
	sudo=(sudo)
fi
echo "install-debian.sh: apt-get install ${missing[*]}" >&2
"${sudo[@]}" apt-get update -qq >&2 || true
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
