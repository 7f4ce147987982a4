// Package extismnode holds the tests of the Node Extism gateway example (gateway.mjs) and its
// manifest. The example itself is JavaScript; see README.md.
package extismnode

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

type manifest struct {
	Wasm   []struct{ Path, Name string } `json:"wasm"`
	Config map[string]string             `json:"config"`
	Memory struct {
		MaxPages int `json:"max_pages"`
	} `json:"memory"`
	TimeoutMs int `json:"timeout_ms"`
}

// TestManifest checks manifest.json: the wasm path is the exchange module `make
// build.exchange` produces, config.config holds a valid stategate configuration (the sample),
// config.exchange is the exchange's JSON options, and the memory and timeout limits are set.
func TestManifest(t *testing.T) {
	raw, err := os.ReadFile("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(m.Wasm) != 1 || filepath.Clean(m.Wasm[0].Path) != exchangeWasm {
		t.Errorf("wasm = %+v; want the one module %s", m.Wasm, exchangeWasm)
	}
	var opts struct {
		MaxBodyBytes int `json:"maxBodyBytes"`
	}
	if err := json.Unmarshal([]byte(m.Config["exchange"]), &opts); err != nil || opts.MaxBodyBytes <= 0 {
		t.Errorf("config.exchange = %q (%v); want JSON options with maxBodyBytes", m.Config["exchange"], err)
	}
	cfg, ok := m.Config[abi.ConfigKey]
	if !ok {
		t.Fatalf("config.%s is missing", abi.ConfigKey)
	}
	if _, err := engine.New([]byte(cfg)); err != nil {
		t.Errorf("config.%s: %v", abi.ConfigKey, err)
	}
	sample, err := os.ReadFile(filepath.Join("..", "..", "abi", "testdata", "config", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	_ = json.Unmarshal([]byte(cfg), &got)
	_ = json.Unmarshal(sample, &want)
	if !reflect.DeepEqual(got, want) {
		t.Error("config.config differs from abi/testdata/config/sample.json")
	}
	if m.Memory.MaxPages <= 0 || m.TimeoutMs <= 0 {
		t.Errorf("memory.max_pages = %d, timeout_ms = %d; want both set", m.Memory.MaxPages, m.TimeoutMs)
	}
}

// TestNodeGateway runs `node gateway.mjs` with no arguments: a real MCP exchange over HTTP on
// 127.0.0.1 through the exchange module under @extism/extism, against an upstream the
// example starts itself, with the workflow's state in the host's Map.
func TestNodeGateway(t *testing.T) {
	needNode(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "gateway.mjs", "--manifest", testManifest(t, nil, ""))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node gateway.mjs: %v", err)
	}
	var s struct {
		ToolsBefore   []string          `json:"toolsBefore"`
		Description   string            `json:"description"`
		PayDenied     string            `json:"payDenied"`
		AddItemText   []string          `json:"addItemText"`
		ToolsAfter    []string          `json:"toolsAfter"`
		UpstreamCalls []string          `json:"upstreamCalls"`
		Stored        map[string]string `json:"stored"`
	}
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("output: %v\n%s", err, out)
	}
	if want := []string{"cart.view", "cart.add_item", "countries.list"}; !reflect.DeepEqual(s.ToolsBefore, want) {
		t.Errorf("tools before = %v; want %v (tools outside state empty hidden)", s.ToolsBefore, want)
	}
	if s.Description != "The countries.list tool. [Cache-Control: immutable]" {
		t.Errorf("description = %q", s.Description)
	}
	if s.PayDenied != abi.DenyToolNotAvailable {
		t.Errorf("cart.pay = %q; want %s", s.PayDenied, abi.DenyToolNotAvailable)
	}
	if len(s.AddItemText) != 2 || s.AddItemText[0] != "[System: Cache invalidated for cart.view — caused by cart.add_item]" {
		t.Errorf("cart.add_item result = %q; want the invalidation block first", s.AddItemText)
	}
	if want := []string{"cart.view", "cart.add_item", "cart.checkout", "countries.list"}; !reflect.DeepEqual(s.ToolsAfter, want) {
		t.Errorf("tools after = %v; want %v", s.ToolsAfter, want)
	}
	if !reflect.DeepEqual(s.UpstreamCalls, []string{"cart.add_item"}) {
		t.Errorf("upstream ran %v; the denied cart.pay must never reach it", s.UpstreamCalls)
	}
	var snap struct{ State string }
	if err := json.Unmarshal([]byte(s.Stored["stategate/v1/checkout/session//demo-session"]), &snap); err != nil || snap.State != "has_items" {
		t.Errorf("stored = %v; want the checkout workflow of demo-session in has_items", s.Stored)
	}
}
