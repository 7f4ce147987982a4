// Package admission reads a request as the server will, from its bytes and headers alone:
// the Origin/Host policy, the headers that must not repeat or disagree with the body, the
// body's size, JSON and repeated members, and the batch rule. It answers with a Refusal
// (status, JSON-RPC code, text) or nothing; the exchange core applies it, counts it and
// does everything that needs its own state.
package admission
