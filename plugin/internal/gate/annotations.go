package gate

// AnnotationsKey is the storage key of what the tool lists told the engine about the tools
// (config.Class per tool name) for one principal:
//
//	stategate/annotations/v1/<principal>
//
// percent-encoded like workflow keys, and outside their stategate/v1/ space. ok is false
// for a principal too long to key by: nothing is remembered for it.
func AnnotationsKey(principal string) (key string, ok bool) {
	if len(principal) > MaxScopeBytes {
		return "", false
	}
	return string(escape([]byte("stategate/annotations/v1/"), principal)), true
}
