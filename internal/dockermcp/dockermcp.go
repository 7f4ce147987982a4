// Package dockermcp runs Docker's MCP gateway (github.com/docker/mcp-gateway, the
// docker-mcp binary) without Docker Engine, for the end-to-end tests of stategate behind
// it: as the remote server in its catalog (fronting, `stategate serve`) and as its
// interceptor (`stategate intercept`).
//
// # Notes
//
//   - The binary is built from the Go module proxy by scripts/install-docker-mcp.sh into a
//     cache outside the repository (instant once built); DOCKER_MCP names another one.
//   - docker-mcp runs with DOCKER_MCP_IN_CONTAINER=1 (no daemon ping), --static (no
//     containers), a catalog under $HOME/.docker/mcp/catalogs/ (it refuses catalog paths
//     outside that folder; HOME is a temporary directory) and
//     DOCKER_MCP_ALLOW_INSECURE_REMOTE_URLS=1 for http://127.0.0.1 remote servers. It speaks
//     MCP over stdio to the client.
package dockermcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/internal/testenv"
)

// Version is the docker-mcp version the tests run (scripts/install-docker-mcp.sh).
const Version = "v0.43.3"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary returns the docker-mcp binary, building it on first use; a binary that cannot be
// had ends t through testenv.Missing.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("DOCKER_MCP"); p != "" {
			binPath = p
			return
		}
		root, err := repoRoot()
		if err != nil {
			binErr = err
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(root, "scripts", "install-docker-mcp.sh"))
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			binErr = fmt.Errorf("scripts/install-docker-mcp.sh: %w\n%s", err, stderr.Bytes())
			return
		}
		binPath = strings.TrimSpace(string(out))
	})
	if binErr == nil {
		if _, err := os.Stat(binPath); err != nil {
			binErr = err
		}
	}
	if binErr != nil {
		testenv.Missing(t, fmt.Errorf("docker-mcp %s is not available (scripts/install-docker-mcp.sh builds it from the Go module proxy): %w", Version, binErr))
	}
	return binPath
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "install-docker-mcp.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/install-docker-mcp.sh not found above the working directory")
		}
		dir = parent
	}
}

// Options configures one docker-mcp gateway run.
type Options struct {
	Catalog      []byte   // the catalog file (YAML)
	Servers      []string // the catalog's servers to enable
	Interceptors []string // --interceptor values ("before:http:URL", "after:http:URL")
}

// Gateway is a docker-mcp gateway run with an official-SDK client session over its stdio.
type Gateway struct {
	Session *mcp.ClientSession
	stderr  *testenv.Buffer
}

// Log is what docker-mcp wrote to stderr so far.
func (g *Gateway) Log() string { return g.stderr.String() }

// Start runs `docker-mcp gateway run` for opts and connects an official Go SDK client to it
// over stdio (mcp.CommandTransport). The process ends with the test.
func Start(t testing.TB, ctx context.Context, opts Options) *Gateway {
	t.Helper()
	bin := Binary(t)
	home := t.TempDir()
	catalogs := filepath.Join(home, ".docker", "mcp", "catalogs")
	if err := os.MkdirAll(catalogs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(catalogs, "stategate-test.yaml"), opts.Catalog, 0o644); err != nil {
		t.Fatal(err)
	}
	secrets := filepath.Join(home, "secrets.env")
	if err := os.WriteFile(secrets, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"gateway", "run", "--catalog", "stategate-test.yaml", "--servers", strings.Join(opts.Servers, ","),
		"--secrets", secrets, "--verify-signatures=false", "--watch=false", "--block-secrets=false", "--static"}
	for _, i := range opts.Interceptors {
		args = append(args, "--interceptor", i)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = home
	// A clean environment: no proxy variables (docker-mcp would send the interceptors'
	// requests through them), no Docker contexts of the machine.
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "DOCKER_CONFIG=" + filepath.Join(home, ".docker"),
		"DOCKER_MCP_IN_CONTAINER=1", "DOCKER_MCP_ALLOW_INSECURE_REMOTE_URLS=1"}
	g := &Gateway{stderr: &testenv.Buffer{}}
	cmd.Stderr = g.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "stategate-docker-e2e", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("docker-mcp gateway run: %v\n%s", err, g.Log())
	}
	g.Session = session
	t.Cleanup(func() {
		session.Close()
		if t.Failed() {
			t.Logf("docker-mcp stderr:\n%s", g.Log())
		}
	})
	return g
}
