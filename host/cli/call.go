package cli

import (
	"bytes"
	"context"
	"io"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/configfile"
	"github.com/stategate/stategate/host/serve"
	"github.com/tidwall/gjson"
)

// Call runs the plugin's function fn (the module at plugin, or the embedded one when "")
// with the configuration at cfgPath ("": none) on stdin's input, and prints its output
// (`stategate call`); an output that is an error ends with status 1.
func Call(ctx context.Context, fn abi.Function, cfgPath, plugin string, stdin io.Reader, stdout io.Writer) error {
	var cfg []byte
	if cfgPath != "" {
		var err error
		if cfg, err = configfile.Load(cfgPath); err != nil {
			return err
		}
	}
	in, err := io.ReadAll(stdin)
	if err != nil {
		return err
	}
	rt, err := serve.LoadPlugin(ctx, plugin, nil, false)
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	inst, err := rt.Instantiate(ctx, cfg)
	if err != nil {
		return err
	}
	out, err := inst.Call(ctx, fn, bytes.TrimSpace(in))
	if err != nil {
		return err
	}
	stdout.Write(append(out, '\n'))
	if gjson.GetBytes(out, "error").Exists() {
		return &ExitError{Code: 1}
	}
	return nil
}
