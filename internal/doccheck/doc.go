// Package doccheck keeps the documentation honest: every relative link in README.md,
// docs/*.md, ARCHITECTURE.md, SECURITY.md and the folders' READMEs resolves to a file (and
// an `#anchor` to a heading of it), the pages stay short enough to read, and README's
// before/after example is what the engine's golden vectors say. Its tests are all of it.
package doccheck
