// Package operator is the operator surface of one configuration's exchange (Operator):
// tool health's actions (health.Service: Tools, SetMode, Approve) and the response cache's
// figures and purge. The admin API and the CLI act through it (host/ops.Operator); the
// exchange makes it (exchange.Core.Operator).
package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/plugin/engine"
)

// Operator is the operator surface of one configuration's exchange.
type Operator struct {
	*health.Service
	cache     *cache.Service // nil: no response cache
	separator string         // names.separator, for matching tool names against a.Match
	publish   func(events.Event)
}

// New returns the operator surface over tool health's service h and the response cache c
// (nil for none); publish publishes the events of its actions.
func New(h *health.Service, c *cache.Service, separator string, publish func(events.Event)) *Operator {
	return &Operator{Service: h, cache: c, separator: separator, publish: publish}
}

// ErrCacheOff is returned by PurgeCache when the configuration has no cache section.
var ErrCacheOff = errors.New("the response cache is not configured (no \"cache\" section)")

// PurgeCache purges the cached tool a.Tool names (byte for byte), or every cached tool
// a.Match selects, on every replica, and returns the tools purged (the operator's purge);
// with a.DryRun it returns the tools it would purge and purges nothing.
func (o *Operator) PurgeCache(ctx context.Context, a health.Action) ([]string, error) {
	if o.cache == nil {
		return nil, ErrCacheOff
	}
	if err := a.Check(); err != nil {
		return nil, err
	}
	if a.Match != "" {
		if _, err := engine.MatchName(a.Match, o.separator, ""); err != nil {
			return nil, fmt.Errorf("%w: match: %v", health.ErrInvalidOperation, err)
		}
	}
	hit, err := o.cache.Select(ctx, func(t string) (bool, error) {
		if a.Match == "" {
			return t == a.Tool, nil
		}
		ok, err := engine.MatchName(a.Match, o.separator, t)
		if err != nil {
			return false, fmt.Errorf("%w: match: %v", health.ErrInvalidOperation, err)
		}
		return ok, nil
	})
	if err != nil || a.DryRun {
		return hit, err
	}
	if err := o.cache.Purge(context.WithoutCancel(ctx), hit); err != nil {
		return hit, err
	}
	data := map[string]any{"causedBy": "operator", "tools": hit}
	if a.Match != "" {
		data["patterns"] = []string{a.Match}
	}
	o.publish(events.Event{Type: events.EventCacheInvalidated, Data: data})
	return hit, nil
}

// CacheFigures returns a tool's cache figures on this replica; false when the cache is
// off or the tool was never looked up in it.
func (o *Operator) CacheFigures(tool string) (cache.Figures, bool) {
	if o.cache == nil {
		return cache.Figures{}, false
	}
	return o.cache.Figures(tool)
}

// AllCacheFigures returns the cache figures of every tool looked up in the cache on this
// replica (what GET /admin/cache lists); false when the cache is off.
func (o *Operator) AllCacheFigures() (map[string]cache.Figures, bool) {
	if o.cache == nil {
		return nil, false
	}
	return o.cache.AllFigures(), true
}
