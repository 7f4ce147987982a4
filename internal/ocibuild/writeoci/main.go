// Command writeoci writes stategate's OCI image layouts for `make oci`:
//
//	go run ./internal/ocibuild/writeoci -filter build/stategate-envoy.wasm \
//	    -gateway build/stategate-static -arch amd64 -version VERSION -out build/oci
//
// It writes OUT/envoy-filter (the Wasm image, oci variant), OUT/envoy-filter-compat (the
// compat variant) and OUT/gateway (the container image), each tagged VERSION.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stategate/stategate/internal/ocibuild"
)

func main() {
	filter := flag.String("filter", "build/stategate-envoy.wasm", "the Envoy filter module")
	gateway := flag.String("gateway", "build/stategate-static", "the static stategate binary (linux)")
	arch := flag.String("arch", "amd64", "the binary's architecture")
	version := flag.String("version", "dev", "the images' tag and version label")
	out := flag.String("out", "build/oci", "where the layouts go")
	flag.Parse()
	if err := run(*filter, *gateway, *arch, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "writeoci: "+err.Error())
		os.Exit(1)
	}
}

func run(filter, gateway, arch, version, out string) error {
	module, err := os.ReadFile(filter)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(gateway)
	if err != nil {
		return err
	}
	for _, l := range []struct {
		dir  string
		make func() (v1.Image, error)
	}{
		{"envoy-filter", func() (v1.Image, error) { return ocibuild.WasmImage(module, version) }},
		{"envoy-filter-compat", func() (v1.Image, error) { return ocibuild.WasmCompatImage(module, version) }},
		{"gateway", func() (v1.Image, error) { return ocibuild.GatewayImage(bin, arch, version) }},
	} {
		img, err := l.make()
		if err != nil {
			return fmt.Errorf("%s: %w", l.dir, err)
		}
		dir := filepath.Join(out, l.dir)
		if err := ocibuild.WriteLayout(dir, img, version); err != nil {
			return err
		}
		d, _ := img.Digest()
		fmt.Printf("%s: %s (%s)\n", dir, d, version)
	}
	return nil
}
