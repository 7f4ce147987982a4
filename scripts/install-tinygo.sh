#!/usr/bin/env bash
# install-tinygo.sh - install TinyGo v0.42.0 (wasip1 only) on Debian 12 without GitHub access.
#
# TinyGo is built from the Go module proxy against Debian's LLVM 19; the wasi-libc and
# compiler-rt libraries it would normally build from git submodules are taken from the
# Debian packages wasi-libc and libclang-rt-19-dev-wasm32 and placed in TinyGo's cache.
#
# Usage:   TINYGO=$(scripts/install-tinygo.sh)
# Env:     TINYGO_HOME  install dir / TINYGOROOT (default: $HOME/.local/tinygo-0.42.0)
#          GO           go binary to build with (default: go in PATH, else /usr/local/go/bin/go)
# Output:  the path of the tinygo binary is the only line on stdout; all logging goes to stderr.
# Idempotent: when everything is in place it exits in a fraction of a second without apt/go.
set -euo pipefail

TINYGO_VERSION=0.42.0
TINYGO_MODULE=github.com/tinygo-org/tinygo
LLVM_MAJOR=19
ESPFLASHER_MODULE=tinygo.org/x/espflasher

TINYGO_HOME="${TINYGO_HOME:-$HOME/.local/tinygo-$TINYGO_VERSION}"
TINYGO_BIN="$TINYGO_HOME/bin/tinygo"
# TinyGo's cache dir is os.UserCacheDir()/tinygo (goenv.Get("GOCACHE")).
TINYGO_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tinygo"
# Layout from builder/library.go + compileopts.Config.LibraryPath for -target=wasip1
# (triple wasm32-unknown-wasi, cpu generic): <cache>/<lib>-wasm32-unknown-wasi-generic/lib.a,
# libc headers in .../include (compileopts.Config.LibcCFlags).
WASI_LIBC_DIR="$TINYGO_CACHE/wasi-libc-wasm32-unknown-wasi-generic"
COMPILER_RT_DIR="$TINYGO_CACHE/compiler-rt-wasm32-unknown-wasi-generic"

DEB_WASI_LIBC_A=/usr/lib/wasm32-wasi/libc.a
DEB_WASI_INCLUDE=/usr/include/wasm32-wasi
DEB_BUILTINS_A=/usr/lib/llvm-$LLVM_MAJOR/lib/clang/$LLVM_MAJOR/lib/wasi/libclang_rt.builtins-wasm32.a

APT_PACKAGES=(
	"llvm-$LLVM_MAJOR-dev" "libclang-$LLVM_MAJOR-dev" "clang-$LLVM_MAJOR" "lld-$LLVM_MAJOR"
	wasi-libc "libclang-rt-$LLVM_MAJOR-dev-wasm32" binaryen g++
)

log() { printf 'install-tinygo: %s\n' "$*" >&2; }
die() { printf 'install-tinygo: ERROR: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- fast path
cache_libs_ok() {
	[[ -s "$WASI_LIBC_DIR/lib.a" && -f "$WASI_LIBC_DIR/include/stdlib.h" && -s "$COMPILER_RT_DIR/lib.a" ]]
}
tinygo_ok() {
	[[ -x "$TINYGO_BIN" ]] || return 1
	local v
	v="$("$TINYGO_BIN" version 2>/dev/null)" || return 1
	[[ "$v" == "tinygo version $TINYGO_VERSION "* ]]
}
runtime_tools_ok() {
	command -v "clang-$LLVM_MAJOR" >/dev/null && command -v "wasm-ld-$LLVM_MAJOR" >/dev/null &&
		command -v wasm-opt >/dev/null
}

# tinygo itself runs `go` (go list / go env); make sure one is reachable for both paths.
GO="${GO:-$(command -v go || true)}"
if [[ -z "$GO" && -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go; fi
if [[ -n "$GO" ]]; then export PATH="$(dirname "$GO"):$PATH"; fi

if cache_libs_ok && runtime_tools_ok && tinygo_ok; then
	printf '%s\n' "$TINYGO_BIN"
	exit 0
fi

log "installing TinyGo $TINYGO_VERSION into $TINYGO_HOME"
[[ -n "$GO" ]] || die "no Go toolchain found (need go >= 1.25 in PATH or /usr/local/go/bin/go, or set GO=)"

# ---------------------------------------------------------------- apt packages
pkg_installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
	pkg_installed "$p" || missing+=("$p")
done
if ((${#missing[@]})); then
	command -v apt-get >/dev/null || die "apt-get not found; need Debian packages: ${missing[*]}"
	SUDO=()
	if [[ "$(id -u)" != 0 ]]; then
		command -v sudo >/dev/null || die "not root and sudo is absent; install as root: apt-get install -y ${missing[*]}"
		SUDO=(sudo)
	fi
	log "apt-get update (missing packages: ${missing[*]})"
	# Unreachable third-party sources make apt-get update exit non-zero even though the Debian
	# indexes were fetched; the install below is the real check.
	if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2; then
		log "warning: apt-get update reported errors; continuing"
	fi
	log "apt-get install ${missing[*]}"
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		"${missing[@]}" >&2 || die "apt-get install failed for: ${missing[*]}"
fi
for f in "$DEB_WASI_LIBC_A" "$DEB_WASI_INCLUDE/stdlib.h" "$DEB_BUILTINS_A"; do
	[[ -e "$f" ]] || die "expected file $f missing after installing Debian packages"
done
runtime_tools_ok || die "clang-$LLVM_MAJOR / wasm-ld-$LLVM_MAJOR / wasm-opt not found in PATH"

# ---------------------------------------------------------------- tinygo binary
work="$(mktemp -d "${TMPDIR:-/tmp}/install-tinygo.XXXXXX")"
cleanup() { rm -rf "$work"; [[ -n "${stage:-}" && -d "${stage:-}" ]] && rm -rf "$stage"; return 0; }
trap cleanup EXIT

export GOTOOLCHAIN=local GO111MODULE=on GOFLAGS=-buildvcs=false CGO_ENABLED=1

if tinygo_ok; then
	log "tinygo binary already present: $TINYGO_BIN"
else
	log "downloading $TINYGO_MODULE@v$TINYGO_VERSION from the Go module proxy"
	json="$(cd "$work" && "$GO" mod download -json "$TINYGO_MODULE@v$TINYGO_VERSION")" ||
		die "go mod download $TINYGO_MODULE@v$TINYGO_VERSION failed (GOPROXY=$("$GO" env GOPROXY))"
	src="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
	[[ -n "$src" && -f "$src/go.mod" ]] || die "could not find downloaded module dir in: $json"

	mkdir -p "$(dirname "$TINYGO_HOME")"
	stage="$(mktemp -d "$TINYGO_HOME.tmp.XXXXXX")"
	cp -R "$src/." "$stage/"
	chmod -R u+w "$stage"
	# Git submodules are not in the module zip. An empty src/net lets TinyGo start (the
	# `net` package is unusable); lib/wasi-libc and lib/compiler-rt are replaced by the
	# prebuilt cache entries below.
	mkdir -p "$stage/src/net"

	# tinygo.org/x/espflasher (ESP32 flashing only) is not served by the proxy: stub it with
	# exactly the API main.go (flashBinUsingEsp32) uses.
	stub="$stage/_stubs/espflasher"
	mkdir -p "$stub/pkg/espflasher"
	printf 'module %s\n\ngo 1.22\n' "$ESPFLASHER_MODULE" >"$stub/go.mod"
	cat >"$stub/pkg/espflasher/espflasher.go" <<'EOF'
// Package espflasher is a local stub: ESP32 flashing is not supported in this TinyGo build.
package espflasher

import (
	"errors"
	"io"
)

type ResetMode int

const (
	ResetDefault ResetMode = iota
	ResetUSBJTAG
)

type Logger interface{}

type StdoutLogger struct{ W io.Writer }

type Options struct {
	Compress  bool
	Logger    Logger
	ResetMode ResetMode
}

func DefaultOptions() *Options { return &Options{} }

type Flasher struct{}

var ErrUnsupported = errors.New("espflasher: ESP32 flashing is not supported in this TinyGo build (stub)")

func New(port string, opts *Options) (*Flasher, error) { return nil, ErrUnsupported }

func (f *Flasher) Close() error                                          { return nil }
func (f *Flasher) ChipName() string                                      { return "" }
func (f *Flasher) EraseFlash(progress func(current, total int)) error    { return ErrUnsupported }
func (f *Flasher) Reset()                                                {}
func (f *Flasher) FlashImage(data []byte, offset uint32, progress func(current, total int)) error {
	return ErrUnsupported
}
EOF
	(cd "$stage" && "$GO" mod edit -replace "$ESPFLASHER_MODULE=./_stubs/espflasher") ||
		die "go mod edit -replace failed"

	log "building tinygo with -tags=llvm$LLVM_MAJOR (takes ~1 min)"
	mkdir -p "$stage/bin"
	(cd "$stage" && "$GO" build -mod=mod -tags="llvm$LLVM_MAJOR" -o bin/tinygo .) >&2 ||
		die "go build of tinygo failed (see output above)"

	rm -rf "$TINYGO_HOME"
	mv "$stage" "$TINYGO_HOME"
	stage=
fi

# ---------------------------------------------------------------- cache libraries
install_lib() { # <dest dir> <archive>
	mkdir -p "$1"
	cp "$2" "$1/lib.a.tmp.$$"
	mv -f "$1/lib.a.tmp.$$" "$1/lib.a"
}
if ! cache_libs_ok; then
	log "placing Debian wasi-libc and compiler-rt builtins in $TINYGO_CACHE"
	rm -rf "$WASI_LIBC_DIR/include"
	mkdir -p "$WASI_LIBC_DIR"
	inc_tmp="$(mktemp -d "$WASI_LIBC_DIR/include.tmp.XXXXXX")"
	cp -R "$DEB_WASI_INCLUDE/." "$inc_tmp/"
	chmod 755 "$inc_tmp"
	mv "$inc_tmp" "$WASI_LIBC_DIR/include"
	install_lib "$WASI_LIBC_DIR" "$DEB_WASI_LIBC_A"
	install_lib "$COMPILER_RT_DIR" "$DEB_BUILTINS_A"
fi

# ---------------------------------------------------------------- smoke test
tinygo_ok || die "$TINYGO_BIN does not report version $TINYGO_VERSION"
mkdir -p "$work/smoke"
printf 'module smoke\n\ngo 1.22\n' >"$work/smoke/go.mod"
printf 'package main\n\nfunc main() { println("ok") }\n' >"$work/smoke/main.go"
(cd "$work/smoke" && "$TINYGO_BIN" build -o smoke.wasm -target=wasip1 -no-debug .) >&2 ||
	die "smoke test: tinygo build -target=wasip1 failed"
log "TinyGo $TINYGO_VERSION ready (wasip1 only)"
printf '%s\n' "$TINYGO_BIN"
