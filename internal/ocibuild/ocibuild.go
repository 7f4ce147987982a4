// Package ocibuild writes stategate's OCI image layouts (go-containerregistry, no Docker
// daemon): the Envoy filter as a Wasm image, in the Wasm image specification's two variants
// that Istio's WasmPlugin and Envoy Gateway's EnvoyExtensionPolicy fetch, and the gateway
// as a container image.
//
// # Notes
//
//   - The "oci" variant is one layer of the raw module, media type
//     application/vnd.module.wasm.content.layer.v1+wasm, under a config of media type
//     application/vnd.module.wasm.config.v1+json. The "compat" variant is an ordinary image
//     whose one gzip tar layer holds plugin.wasm, for registries and tools that refuse
//     custom media types. Istio and Envoy Gateway load either.
//   - The gateway image is one layer: the static binary at /stategate, an empty home for
//     the non-root user 65532 (its state directory: the default bolt file and admin token),
//     and /tmp. Entrypoint /stategate.
//   - Every timestamp is zero and every file's owner and mode fixed, so the same inputs give
//     the same digests.
package ocibuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the Wasm image specification's oci variant.
const (
	WasmLayerMediaType  types.MediaType = "application/vnd.module.wasm.content.layer.v1+wasm"
	WasmConfigMediaType types.MediaType = "application/vnd.module.wasm.config.v1+json"
)

// The user the gateway image runs as, and its home.
const (
	User = "65532:65532"
	Home = "/home/nonroot"
)

// RefName is the annotation a layout's index gives each image's tag.
const RefName = "org.opencontainers.image.ref.name"

// WasmImage is the module in the oci variant: one layer of its bytes.
func WasmImage(module []byte, version string) (v1.Image, error) {
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:       static.NewLayer(module, WasmLayerMediaType),
		Annotations: map[string]string{"org.opencontainers.image.title": "plugin.wasm"},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{Architecture: "wasm", OS: "wasip1",
		RootFS: v1.RootFS{Type: "layers"}, Config: v1.Config{Labels: labels(version)}})
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, WasmConfigMediaType)
	return mutate.Annotations(img, labels(version)).(v1.Image), nil
}

// WasmCompatImage is the module in the compat variant: a gzip tar layer holding plugin.wasm.
func WasmCompatImage(module []byte, version string) (v1.Image, error) {
	layer, err := tarLayer([]entry{{name: "plugin.wasm", mode: 0o644, body: module}})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	img, err = mutate.ConfigFile(img, withRootFS(img, &v1.ConfigFile{Architecture: "wasm", OS: "wasip1",
		Config: v1.Config{Labels: labels(version)}}))
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Annotations(img, labels(version)).(v1.Image), nil
}

// GatewayImage is the container image of the static binary bin, for arch (amd64, arm64).
func GatewayImage(bin []byte, arch, version string) (v1.Image, error) {
	layer, err := tarLayer([]entry{
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, owner: 65532},
		{name: "stategate", mode: 0o755, body: bin},
		{name: "tmp/", dir: true, mode: 0o1777},
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	img, err = mutate.ConfigFile(img, withRootFS(img, &v1.ConfigFile{Architecture: arch, OS: "linux",
		Config: v1.Config{
			Entrypoint:   []string{"/stategate"},
			Cmd:          []string{"--help"},
			User:         User,
			WorkingDir:   Home,
			Env:          []string{"HOME=" + Home, "PATH=/"},
			ExposedPorts: map[string]struct{}{"8080/tcp": {}},
			Labels:       labels(version),
		}}))
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Annotations(img, labels(version)).(v1.Image), nil
}

// WriteLayout writes img as the only image of a new OCI image layout at dir (replacing
// what was there), tagged tag.
func WriteLayout(dir string, img v1.Image, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("oci layout[%s]: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefName: tag})); err != nil {
		return fmt.Errorf("oci layout[%s]: %w", dir, err)
	}
	return nil
}

func labels(version string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":   "stategate",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/stategate/stategate",
	}
}

// withRootFS sets cfg's rootfs to img's layers (mutate.ConfigFile replaces the config whole).
func withRootFS(img v1.Image, cfg *v1.ConfigFile) *v1.ConfigFile {
	if cur, err := img.ConfigFile(); err == nil {
		cfg.RootFS = cur.RootFS
		cfg.History = cur.History
	}
	return cfg
}

type entry struct {
	name  string
	dir   bool
	mode  int64
	owner int
	body  []byte
}

// tarLayer is a gzip tar layer of entries, with zero times and fixed owners.
func tarLayer(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithMediaType(types.OCILayer))
}
