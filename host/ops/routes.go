package ops

// Route is one endpoint of the admin listener: its method and path. NewAdmin registers
// every route below and Client calls them, so the server and its client name each
// endpoint in one place.
type Route struct {
	Method string
	Path   string // a net/http pattern's path ("{$}" ends an exact match)
}

// pattern is the route as a net/http.ServeMux pattern.
func (r Route) pattern() string { return r.Method + " " + r.Path }

// The admin listener's routes. The probes, the page and its assets answer without the
// token; every other route requires it (Admin.auth).
var (
	RouteHealthz   = Route{"GET", "/healthz"}
	RouteReadyz    = Route{"GET", "/readyz"}
	RoutePage      = Route{"GET", "/{$}"}
	RouteAdminPage = Route{"GET", "/admin/{$}"}
	RouteStatic    = Route{"GET", "/admin/static/"}

	RouteMetrics       = Route{"GET", "/metrics"}
	RouteInfo          = Route{"GET", "/admin/info"}
	RouteLatency       = Route{"GET", "/admin/latency"}
	RouteTools         = Route{"GET", "/admin/tools"}          // ToolView each
	RouteToolsOverview = Route{"GET", "/admin/tools/overview"} // ToolOverview each, and whether health is on
	RouteWorkflows     = Route{"GET", "/admin/workflows"}
	RouteMode          = Route{"POST", "/admin/tools/mode"}    // ModeRequest
	RouteApprove       = Route{"POST", "/admin/tools/approve"} // ApproveRequest
	RoutePurge         = Route{"POST", "/admin/cache/purge"}   // Target
	RouteCache         = Route{"GET", "/admin/cache"}
	RouteState         = Route{"GET", "/admin/state"}
	RouteReset         = Route{"POST", "/admin/state/reset"} // ResetRequest
	RouteReload        = Route{"POST", "/admin/reload"}
	RouteApprovals     = Route{"GET", "/admin/approvals"}          // the calls held for an operator, pending
	RouteApproveCall   = Route{"POST", "/admin/approvals/approve"} // DecideRequest
	RouteDenyCall      = Route{"POST", "/admin/approvals/deny"}    // DecideRequest
	RouteEvents        = Route{"GET", "/admin/events"}             // SSE
	RouteHistory       = Route{"GET", "/admin/events/history"}
	RouteWSEvents      = Route{"GET", "/admin/ws/events"}
)
