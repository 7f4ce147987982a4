# proxy-build.sh - sourced by the install-*.sh scripts that build a Go program from the Go
# module proxy (install-docker-mcp.sh, install-traefik.sh): their logging, the Go toolchain,
# the download into a scratch directory, and the final move into the cache.
#
# The sourcing script sets NAME (the program, for messages), MODULE, VERSION and BIN (the
# binary's path in the cache) before it calls these.

log() { printf 'install-%s: %s\n' "$NAME" "$*" >&2; }
die() { printf 'install-%s: ERROR: %s\n' "$NAME" "$*" >&2; exit 1; }

# proxy_fetch finds Go (GO=, else go in PATH, else /usr/local/go/bin/go), downloads
# MODULE@VERSION from the proxy and copies it, writable, to "$work/src"; $work is a scratch
# directory beside BIN, removed on exit.
proxy_fetch() {
	GO="${GO:-$(command -v go || true)}"
	if [[ -z "$GO" && -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go; fi
	[[ -n "$GO" ]] || die "no Go toolchain found (set GO=)"

	mkdir -p "$(dirname "$BIN")"
	work="$(mktemp -d "$(dirname "$BIN")/build.XXXXXX")"
	trap 'rm -rf "$work"' EXIT
	export GOTOOLCHAIN=local GO111MODULE=on GOFLAGS=-buildvcs=false CGO_ENABLED=0

	log "downloading $MODULE@$VERSION from the Go module proxy"
	local json src
	json="$(cd "$work" && "$GO" mod download -json "$MODULE@$VERSION")" ||
		die "go mod download $MODULE@$VERSION failed (GOPROXY=$("$GO" env GOPROXY))"
	src="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
	[[ -n "$src" && -f "$src/go.mod" ]] || die "could not find the downloaded module in: $json"

	cp -R "$src/." "$work/src"
	chmod -R u+w "$work/src"
}

# proxy_install BUILT ARGS...: checks that BUILT runs (BUILT ARGS... exits 0), then moves it
# to BIN, last, by a rename, so the binary's presence means a finished build; prints BIN.
# $start is the build's start ($SECONDS).
proxy_install() {
	"$@" >/dev/null 2>&1 || die "the built $NAME does not run"
	mv -f "$1" "$BIN"
	log "$NAME $VERSION ready in $((SECONDS - start)) s: $BIN ($(du -h "$BIN" | cut -f1))"
	printf '%s\n' "$BIN"
}
