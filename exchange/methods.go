package exchange

// MCP methods the core acts on.
const (
	MethodInitialize = "initialize"
	MethodToolsList  = "tools/list"
	MethodToolsCall  = "tools/call"
)

// actsOn reports whether the core rewrites or gates requests of method.
func actsOn(method string) bool {
	switch method {
	case MethodToolsCall, MethodToolsList, MethodInitialize, MethodTasksGet, MethodTasksResult, MethodTasksCancel:
		return true
	}
	return false
}
