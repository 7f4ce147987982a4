// Package peers is the side-by-side benchmark of stategate against the MCP gateways and
// proxies users would pick instead (`make bench.peers`): one upstream, one load generator,
// every row in a process of its own, figures as ratios to a do-nothing reverse proxy in the
// same run. The benchmark is BenchmarkPeers in this package's tests; this file holds only
// the package's documentation.
//
// Rows: the plain reverse proxy (httputil.ReverseProxy, the baseline), stategate decorating
// (the demo configuration: policies and a workflow) and pass-through (no policies), Docker's
// MCP gateway (scripts/install-docker-mcp.sh), ToolHive's `thv proxy`
// (scripts/install-thv.sh) and the npm proxies supergateway and mcp-proxy
// (scripts/install-npm-peers.sh), chained through stdio where they cannot front a
// Streamable HTTP server directly. A row that cannot be built or started is printed as
// "not run" with the reason.
package peers
