package testharness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/testenv"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

// Paths used by the Node smoke test, relative to this package.
const (
	nodeSmokeWasm   = "../build/stategate.wasm"
	nodeSmokeDir    = "node"
	nodeSmokeConfig = "../abi/testdata/config/sample.json"
)

// nodeSmokeRequire skips the test when a prerequisite is missing, unless
// STATEGATE_REQUIRE_ALL=1, in which case the missing prerequisite is a failure.
func nodeSmokeRequire(t *testing.T, err error) { t.Helper(); testenv.Missing(t, err) }

func nodeSmokeHost(t *testing.T) NodeExtism {
	t.Helper()
	if _, err := os.Stat(nodeSmokeWasm); err != nil {
		nodeSmokeRequire(t, fmt.Errorf("%s is missing: run `make build` (%v)", nodeSmokeWasm, err))
	}
	nodeSmokeRequire(t, NodeAvailable(nodeSmokeDir))
	return NodeExtism{Wasm: nodeSmokeWasm, Dir: nodeSmokeDir}
}

func TestNodeExtism_smoke(t *testing.T) {
	host := nodeSmokeHost(t)
	cfg, err := os.ReadFile(nodeSmokeConfig)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []Job{
		{Config: cfg, Fn: abi.FuncCheckConfig, Input: []byte(`{}`)},
		{Config: cfg, Fn: abi.FuncCheckLimits, Input: []byte(`{"tool":"bulk.import","arguments":{"orders":[{"lines":[1,2,3]}]}}`)},
		{Config: cfg, Fn: abi.FuncDecorateResult, Input: []byte(`{"tool":"tasks.update","message":{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"ok"}]}}}`)},
		{Config: cfg, Fn: abi.FuncCheckLimits, Input: []byte(`{"tool":`)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := host.RunBatch(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		want := eng.Call(j.Fn, j.Input)
		if !bytes.Equal(got[i], want) {
			t.Errorf("job %d %s(%s):\n node: %s\n want: %s", i, j.Fn.Name(), j.Input, got[i], want)
		}
	}
	const notice = "[System: Cache invalidated for tasks.*, sprints.* — caused by tasks.update]"
	if !strings.Contains(string(got[2]), notice) {
		t.Errorf("decorate_result output lacks %q: %s", notice, got[2])
	}
	if !strings.Contains(string(got[3]), abi.ErrInvalidJSON) {
		t.Errorf("invalid input did not answer %s: %s", abi.ErrInvalidJSON, got[3])
	}
}
