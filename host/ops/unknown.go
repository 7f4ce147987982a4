package ops

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stategate/stategate/exchange/toollist"
)

// UnknownLister returns the configuration's tool names that no tool the upstream listed
// meets (exchange.Core.UnknownTools of the core serving now).
type UnknownLister func() []toollist.UnknownTool

// WatchUnknownTools exports the configuration's unknown tool names, read at each scrape:
// stategate_config_unknown_tools{kind} counts them by where they appear (0 once fixed), and
// stategate_config_unknown_tool{tool,kind} names each. The names come from the operator's
// configuration, never from clients, so the label set is bounded by it.
func (m *Metrics) WatchUnknownTools(list UnknownLister) {
	m.Registry.MustRegister(&unknownCollector{list: list})
}

var (
	unknownCountDesc = prometheus.NewDesc("stategate_config_unknown_tools",
		"Tool names (and patterns) of the configuration that no tool the upstream listed meets, by kind (binding, policy, limit).",
		[]string{"kind"}, nil)
	unknownNameDesc = prometheus.NewDesc("stategate_config_unknown_tool",
		"1 for each tool name (or pattern) of the configuration that no tool the upstream listed meets, by kind.",
		[]string{"tool", "kind"}, nil)
)

type unknownCollector struct{ list UnknownLister }

func (c *unknownCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- unknownCountDesc
	ch <- unknownNameDesc
}

func (c *unknownCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{toollist.PlaceBinding: 0, toollist.PlacePolicy: 0, toollist.PlaceLimit: 0}
	for _, u := range c.list() {
		seen := map[string]bool{}
		for _, p := range u.Where {
			if seen[p.Kind] {
				continue // a name bound in two workflows counts once
			}
			seen[p.Kind] = true
			counts[p.Kind]++
			ch <- prometheus.MustNewConstMetric(unknownNameDesc, prometheus.GaugeValue, 1, u.Name, p.Kind)
		}
	}
	for kind, n := range counts {
		ch <- prometheus.MustNewConstMetric(unknownCountDesc, prometheus.GaugeValue, float64(n), kind)
	}
}
