package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/stategate/stategate/host/configfile"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/termsafe"
	"github.com/stategate/stategate/plugin/built"
	"github.com/stategate/stategate/plugin/engine"
)

// loadConfig reads a JSON or YAML (1.2) configuration and returns it as JSON
// (host/configfile: the one loader of every command).
func loadConfig(path string) ([]byte, error) { return configfile.Load(path) }

// LoadValidated loads the configuration at path, validates it (every error at once) and
// logs its warnings: what serve and stdio do before they start.
func LoadValidated(path string, logger *slog.Logger) ([]byte, *engine.Engine, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	eng, err := Validate(path, cfg)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range eng.Warnings() {
		logger.Warn("config", "warning", w.String())
	}
	return cfg, eng, nil
}

// ConfigError is a configuration the engine refuses, with every error it found.
type ConfigError struct {
	Path    string
	Details []string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("config[%s]: %d error(s):\n  %s", e.Path, len(e.Details), strings.Join(e.Details, "\n  "))
}

// Validate builds the native engine to list every configuration error before start-up
// (a *ConfigError).
func Validate(path string, cfg []byte) (*engine.Engine, error) {
	eng, err := engine.New(cfg)
	if err != nil {
		var ee *engine.Error
		if errors.As(err, &ee) && len(ee.Details) > 0 {
			return nil, &ConfigError{Path: path, Details: ee.Details}
		}
		return nil, fmt.Errorf("config[%s]: %w", path, err)
	}
	return eng, nil
}

// LoadPlugin compiles the plugin module: the file at path, or the embedded one when path
// is empty.
func LoadPlugin(ctx context.Context, path string, logger *slog.Logger, interruptible bool) (*wasmrt.Runtime, error) {
	wasm, name := built.Module, built.Name
	if path != "" {
		var err error
		if wasm, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("plugin[%s]: %w (--plugin names a module file; leave it out to use the module built into this binary)", path, err)
		}
		name = filepath.Base(path)
	}
	return wasmrt.New(ctx, wasm, wasmrt.Options{Interruptible: interruptible, Logger: logger, Name: name})
}

// NewLogger is serve's and stdio's logger on w (stderr): text or JSON.
func NewLogger(format string, w io.Writer) *slog.Logger {
	var logger *slog.Logger
	if format == "json" {
		// The text handler quotes every value that holds a control (strconv); the JSON
		// one escapes C0 controls only: termsafe.Writer escapes DEL, C1 and bidi controls
		// too, so a tool name or an upstream's error cannot act on a terminal tailing it.
		logger = slog.New(slog.NewJSONHandler(termsafe.Writer(w), &slog.HandlerOptions{Level: slog.LevelInfo}))
	} else {
		logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return logger
}
