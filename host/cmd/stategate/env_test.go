package main

import (
	"os"
	"testing"
)

// TestMain gives the package's in-process gateways a state directory of their own: serve
// keeps its default store, admin token and record there (gateways.go).
func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) != "" {
		os.Exit(stdioServer()) // this binary as a stdio MCP server (stdio_test.go)
	}
	dir, err := os.MkdirTemp("", "stategate-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
