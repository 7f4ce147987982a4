package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/exchange"
)

// probeTools lists the upstream's tools once, as a client would (initialize, then
// tools/list page by page, with the official Go SDK client), and hands the list to the
// exchange core serving now (exchange.Core.ToolsListed): the configuration's tool names no
// listed tool meets are then reported at start-up, before any client lists. Serving never
// waits for it: a failed listing (upstream down, authorization required) is logged once and
// tried again every interval until one succeeds; the first tools/list a client sends through
// the gateway checks the names too.
func probeTools(ctx context.Context, upstream Upstream, core func() *exchange.Core, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		every = 5 * time.Second
	}
	for failed := false; ; failed = true {
		tools, err := ListTools(ctx, upstream.URL.String(), upstream.mcpTransport())
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			if c := core(); c != nil {
				c.ToolsListed(ctx, tools)
			}
			log.Info("upstream tools listed", "upstream", upstream.String(), "bytes", len(tools))
			return
		}
		if !failed {
			log.Warn("upstream tools not listed; retrying (clients' tools/list answers are checked meanwhile)", "upstream", upstream.String(), "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// ListTools lists every tool of the server t reaches (named url in errors).
func ListTools(ctx context.Context, url string, t mcp.Transport) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "stategate-explain", Version: "1"}, nil)
	cs, err := c.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("upstream[%s]: %w", url, err)
	}
	defer cs.Close()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("upstream[%s]: tools/list: %w", url, err)
		}
		tools = append(tools, t)
	}
	return json.Marshal(tools)
}
