package testharness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/stategate/stategate/abi"
)

// Job is one export call: the stategate configuration, the export and its input.
type Job struct {
	Config []byte
	Fn     abi.Function
	Input  []byte
}

// NodeExtism runs jobs through @extism/extism under Node (testharness/node/run.mjs).
type NodeExtism struct {
	Wasm string // path to the module
	Dir  string // the testharness/node directory (holds run.mjs and node_modules)
}

// Name identifies the host in test and benchmark output.
func (n NodeExtism) Name() string { return "node/extism" }

// NodeAvailable reports whether the Node host can run: nil when `node` is on PATH and
// dir/node_modules/@extism/extism exists.
func NodeAvailable(dir string) error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node host unavailable: node is not on PATH (install Node >= 18, then run `make node`): %w", err)
	}
	pkg := filepath.Join(dir, "node_modules", "@extism", "extism")
	if _, err := os.Stat(pkg); err != nil {
		return fmt.Errorf("node host unavailable: %s is missing; run `make node`", pkg)
	}
	return nil
}

type nodeJob struct {
	Config   string `json:"config"`
	Function string `json:"function"`
	Input    string `json:"input"`
}

type nodeJobFile struct {
	Wasm string    `json:"wasm"`
	Jobs []nodeJob `json:"jobs"`
}

type nodeResult struct {
	Output *string `json:"output"`
	Error  *string `json:"error"`
}

// RunBatch runs jobs in order, one plugin per distinct configuration, and answers each
// job's output bytes. A job the host could not run is an error naming its index.
func (n NodeExtism) RunBatch(ctx context.Context, jobs []Job) ([][]byte, error) {
	file, err := n.writeJobs(jobs)
	if err != nil {
		return nil, err
	}
	defer os.Remove(file)

	stdout, err := n.run(ctx, file)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Results []nodeResult `json:"results"`
	}
	if err := json.Unmarshal(stdout, &doc); err != nil {
		return nil, fmt.Errorf("%s: parsing run.mjs output: %w", n.Name(), err)
	}
	if len(doc.Results) != len(jobs) {
		return nil, fmt.Errorf("%s: %d results for %d jobs", n.Name(), len(doc.Results), len(jobs))
	}
	out := make([][]byte, len(jobs))
	for i, r := range doc.Results {
		switch {
		case r.Error != nil:
			return nil, fmt.Errorf("%s: job %d (%s): %s", n.Name(), i, jobs[i].Fn.Name(), *r.Error)
		case r.Output == nil:
			return nil, fmt.Errorf("%s: job %d (%s): neither output nor error", n.Name(), i, jobs[i].Fn.Name())
		}
		out[i] = []byte(*r.Output)
	}
	return out, nil
}

// Bench runs each job iterations times on its plugin after a warm-up and answers the
// Node host's time per call in microseconds, one figure per job.
func (n NodeExtism) Bench(ctx context.Context, jobs []Job, iterations int) ([]float64, error) {
	file, err := n.writeJobs(jobs)
	if err != nil {
		return nil, err
	}
	defer os.Remove(file)
	stdout, err := n.run(ctx, file, "--bench", fmt.Sprint(iterations))
	if err != nil {
		return nil, err
	}
	var doc struct {
		PerCallMicros []float64 `json:"perCallMicros"`
	}
	if err := json.Unmarshal(stdout, &doc); err != nil {
		return nil, fmt.Errorf("%s: parsing run.mjs bench output: %w", n.Name(), err)
	}
	if len(doc.PerCallMicros) != len(jobs) {
		return nil, fmt.Errorf("%s: %d bench figures for %d jobs", n.Name(), len(doc.PerCallMicros), len(jobs))
	}
	return doc.PerCallMicros, nil
}

// writeJobs writes the job file run.mjs reads and answers its path.
func (n NodeExtism) writeJobs(jobs []Job) (string, error) {
	wasm, err := filepath.Abs(n.Wasm)
	if err != nil {
		return "", err
	}
	doc := nodeJobFile{Wasm: wasm, Jobs: make([]nodeJob, len(jobs))}
	for i, j := range jobs {
		name := j.Fn.Name()
		if name == "" {
			return "", fmt.Errorf("%s: job %d: unknown function %d", n.Name(), i, j.Fn)
		}
		for _, b := range [][]byte{j.Config, j.Input} {
			if !utf8.Valid(b) {
				return "", fmt.Errorf("%s: job %d: config and input must be UTF-8 for the Node host", n.Name(), i)
			}
		}
		doc.Jobs[i] = nodeJob{Config: string(j.Config), Function: name, Input: string(j.Input)}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "stategate-node-jobs-*.json")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// run runs `node run.mjs file args...` in n.Dir and answers its stdout.
func (n NodeExtism) run(ctx context.Context, file string, args ...string) ([]byte, error) {
	if err := NodeAvailable(n.Dir); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", append([]string{"run.mjs", file}, args...)...)
	cmd.Dir = n.Dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = errors.Join(err, ctxErr)
		}
		return nil, fmt.Errorf("%s: node run.mjs: %w: %s", n.Name(), err, msg)
	}
	return stdout.Bytes(), nil
}
