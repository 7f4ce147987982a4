// Package toollist is what the exchange keeps of the upstream's tool lists: the memo of
// decorated lists (Lists) and of decorated tools, which decorates a list that changed by a
// few tools through those alone (Tools, Reader); each session's last list (Known); the
// names the upstream listed (Listed, Seen) and the configuration's names none of them meets
// (Unknown); the tools' Mcp-Param-* declarations (Params). Standard Go, no I/O: the engine
// and the state are the exchange's, handed in as functions.
package toollist
