package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/stategate/stategate/plugin/built"
)

// Version prints the build's version (the module version `go install` stamps, else the
// VCS revision `go build` stamps in a checkout) and the embedded plugin module's size and
// SHA-256, which `sha256sum build/stategate.wasm` reproduces from a `make build`.
func Version(stdout io.Writer) int {
	version, revision := buildVersion()
	fmt.Fprintf(stdout, "stategate %s\n", version)
	if revision != "" {
		fmt.Fprintf(stdout, "revision: %s\n", revision)
	}
	fmt.Fprintf(stdout, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "plugin: %s, %d bytes, sha256 %s\n", built.Name, len(built.Module), built.SHA256())
	return 0
}

// buildVersion returns the main module's version ("(devel)" when nothing stamped one) and
// the VCS revision with its time, "+modified" when the tree had changes.
func buildVersion() (version, revision string) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module support)", ""
	}
	version = info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev != "" {
		revision = rev + modified
		if at != "" {
			revision += " (" + at + ")"
		}
	}
	return version, revision
}
