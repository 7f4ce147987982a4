package serve

import (
	"context"
	"sync/atomic"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/host/store"
)

// served is the gateway as the admin API and the metrics see it (ops.Gateway, and an
// ops.Reloader and ops.Resetter): the gateway and its store once started (nil before),
// and the configuration serving now (the reloader's, which a reload swaps).
type served struct {
	gw atomic.Pointer[gateway.Gateway]
	st atomic.Pointer[store.Store]
	rl *reloader
}

var (
	_ ops.Gateway  = (*served)(nil)
	_ ops.Reloader = (*served)(nil)
	_ ops.Resetter = (*served)(nil)
)

func (s *served) Operator() ops.Operator {
	if g := s.gw.Load(); g != nil {
		return g.Core().Operator()
	}
	return nil // starting: health is off
}

func (s *served) State() exchange.State {
	if st := s.st.Load(); st != nil {
		return store.StateOf(*st)
	}
	return nil
}

func (s *served) StateKey(workflow, principal, value string) (string, error) {
	return s.rl.eng.Load().StateKey(workflow, principal, value)
}

func (s *served) ResetSnapshot(workflow, to string, old []byte) ([]byte, string, error) {
	return s.rl.eng.Load().ResetSnapshot(workflow, to, old)
}

func (s *served) Reload(ctx context.Context) ops.ReloadResult { return s.rl.reload(ctx) }

func (s *served) Stats() map[string]int64 {
	out := map[string]int64{}
	if g := s.gw.Load(); g != nil {
		for c := stats.Counter(0); c < stats.NumCounters; c++ {
			out[c.String()] = g.Stats.Get(c)
		}
		out["plugin_instances_replaced"] = g.PluginReplaced.Load()
	}
	return out
}

func (s *served) Listed() []string {
	if g := s.gw.Load(); g != nil {
		return g.Core().ListedNames()
	}
	return nil
}

func (s *served) ToolHint(name string) string { return ToolHint(s.rl.eng.Load(), name) }

func (s *served) UnknownTools() []toollist.UnknownTool {
	if g := s.gw.Load(); g != nil {
		return g.Core().UnknownTools()
	}
	return nil
}

func (s *served) Workflows() any { return WorkflowGraphs(s.rl.eng.Load(), "mermaid") }

// listed reports whether the upstream listed tool name (the metrics' label guard).
func (s *served) listed(name string) bool {
	g := s.gw.Load()
	return g != nil && g.Listed(name)
}

// tools is the tools' health for the metrics.
func (s *served) tools(ctx context.Context) ([]health.ToolStatus, error) {
	if g := s.gw.Load(); g != nil {
		return g.Core().Operator().Tools(ctx)
	}
	return nil, health.ErrOff
}
