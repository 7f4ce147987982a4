package upstream

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Command starts a stdio MCP server: one child process per connection, spoken to with
// newline-delimited JSON-RPC on its stdin and stdout by the official Go SDK's
// CommandTransport. Ending a connection closes the child's stdin, waits TerminateAfter,
// then sends SIGTERM, then SIGKILL (the SDK's shutdown, as the MCP specification asks).
type Command struct {
	Path string
	Args []string
	// Env is the child's environment (nil: this process's); Dir its working directory
	// ("": this process's).
	Env []string
	Dir string
	// Stderr receives the child's stderr (nil: this process's stderr).
	Stderr io.Writer
	// TerminateAfter is how long a child may take to exit after its stdin closed (default
	// 2 s).
	TerminateAfter time.Duration
}

// Dial starts one child.
func (c Command) Dial(ctx context.Context, _ http.Header) (mcp.Connection, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env, cmd.Dir, cmd.Stderr = c.Env, c.Dir, c.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	endWithParent(cmd)
	d := c.TerminateAfter
	if d <= 0 {
		d = 2 * time.Second
	}
	return (&mcp.CommandTransport{Command: cmd, TerminateDuration: d}).Connect(ctx)
}
