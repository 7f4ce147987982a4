package ocibuild

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stategate/stategate/internal/testenv"
)

const (
	filterWasm = "../../build/stategate-envoy.wasm"
	layouts    = "../../build/oci"
)

// TestLayouts checks what `make oci` wrote: each layout is a valid OCI image layout
// (go-containerregistry's validate, which `crane validate` runs), pushes to a registry
// (the library's own, on loopback) and validates again as pulled; the Wasm images carry
// the built filter byte for byte, the oci variant as one layer of its media type and the
// compat variant as plugin.wasm in a tar layer; the gateway image runs as a non-root
// user and the binary in it runs.
func TestLayouts(t *testing.T) {
	testenv.NeedFile(t, filepath.Join(layouts, "gateway", "index.json"), "run `make oci`")
	module, err := os.ReadFile(filterWasm)
	if err != nil {
		t.Fatal(err)
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")

	images := map[string]v1.Image{}
	for _, dir := range []string{"envoy-filter", "envoy-filter-compat", "gateway"} {
		idx, err := layout.ImageIndexFromPath(filepath.Join(layouts, dir))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if err := validate.Index(idx); err != nil {
			t.Fatalf("%s: layout not valid: %v", dir, err)
		}
		im, _ := idx.IndexManifest()
		if len(im.Manifests) != 1 || im.Manifests[0].Annotations[RefName] == "" {
			t.Fatalf("%s: want one tagged image, got %+v", dir, im.Manifests)
		}
		img, err := idx.Image(im.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(host + "/stategate/" + dir + ":" + im.Manifests[0].Annotations[RefName])
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatalf("%s: push: %v", dir, err)
		}
		pulled, err := remote.Image(ref)
		if err != nil {
			t.Fatalf("%s: pull: %v", dir, err)
		}
		if err := validate.Image(pulled); err != nil {
			t.Fatalf("%s: pulled image not valid: %v", dir, err)
		}
		images[dir] = pulled
	}

	// The oci variant: one layer, the module itself.
	layers, _ := images["envoy-filter"].Layers()
	if len(layers) != 1 {
		t.Fatalf("envoy-filter: %d layers", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != WasmLayerMediaType {
		t.Fatalf("envoy-filter layer media type %s", mt)
	}
	if m, _ := images["envoy-filter"].Manifest(); m.Config.MediaType != WasmConfigMediaType {
		t.Fatalf("envoy-filter config media type %s", m.Config.MediaType)
	}
	if got := readAll(t, layers[0]); !bytes.Equal(got, module) {
		t.Fatalf("envoy-filter layer is not build/stategate-envoy.wasm (%d bytes, want %d)", len(got), len(module))
	}
	// The compat variant: plugin.wasm in the one tar layer.
	files := untar(t, images["envoy-filter-compat"])
	if len(files) != 1 || !bytes.Equal(files["plugin.wasm"].body, module) {
		t.Fatalf("envoy-filter-compat holds %d files; plugin.wasm %d bytes, want %d", len(files), len(files["plugin.wasm"].body), len(module))
	}

	// The gateway: non-root, the binary runs and names the plugin it carries.
	cfg, err := images["gateway"].ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != User || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/stategate" || cfg.OS != "linux" {
		t.Fatalf("gateway config: %+v", cfg.Config)
	}
	files = untar(t, images["gateway"])
	bin, home := files["stategate"], files["home/nonroot/"]
	if bin.body == nil || bin.mode&0o111 == 0 || home.uid != 65532 {
		t.Fatalf("gateway layer: stategate mode %o, home owner %d", bin.mode, home.uid)
	}
	exe := filepath.Join(t.TempDir(), "stategate")
	if err := os.WriteFile(exe, bin.body, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "plugin: stategate.wasm (embedded)") {
		t.Fatalf("the image's binary: %v\n%s", err, out)
	}
}

// TestWasmImage_reproducible: the same module gives the same digest.
func TestWasmImage_reproducible(t *testing.T) {
	for _, build := range []func([]byte, string) (v1.Image, error){WasmImage, WasmCompatImage} {
		a, err := build([]byte("\x00asm\x01\x00\x00\x00"), "v1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := build([]byte("\x00asm\x01\x00\x00\x00"), "v1")
		da, _ := a.Digest()
		db, _ := b.Digest()
		if da != db {
			t.Fatalf("two builds: %s, %s", da, db)
		}
		// Written and read back, as `make oci` and a puller see it.
		dir := t.TempDir()
		if err := WriteLayout(dir, a, "v1"); err != nil {
			t.Fatal(err)
		}
		idx, err := layout.ImageIndexFromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate.Index(idx); err != nil {
			t.Fatal(err)
		}
	}
}

func readAll(t *testing.T, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type file struct {
	body []byte
	mode int64
	uid  int
}

func untar(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	layers, _ := img.Layers()
	if len(layers) != 1 {
		t.Fatalf("%d layers", len(layers))
	}
	tr := tar.NewReader(bytes.NewReader(readAll(t, layers[0])))
	out := map[string]file{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeDir {
			b = nil
		}
		out[h.Name] = file{body: b, mode: h.Mode, uid: h.Uid}
	}
}
