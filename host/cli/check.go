package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/stategate/stategate/host/configfile"
	"github.com/stategate/stategate/internal/termsafe"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// Check validates the configuration at path and prints its errors, warnings and workflow
// fingerprints (`stategate check`); with the tools listed in toolsPath or by the server at
// upstream, it also warns about configuration no listed tool meets.
func Check(ctx context.Context, path, toolsPath, upstream string, stdout io.Writer) error {
	cfg, err := configfile.Load(path)
	if err != nil {
		return err
	}
	res := gjson.ParseBytes(engine.CheckConfig(cfg))
	if res.Get("valid").Bool() && (toolsPath != "" || upstream != "") {
		// With the tool list, the engine also says which configuration no listed tool meets.
		if res, err = explainAnswer(ctx, path, toolsPath, upstream); err != nil {
			return err
		}
	}
	for _, e := range res.Get("errors").Array() {
		fmt.Fprintln(stdout, "error:   "+termsafe.String(e.Str))
	}
	for _, w := range res.Get("warnings").Array() {
		fmt.Fprintln(stdout, "warning: "+termsafe.String(w.Str)) // may name the upstream's tools
	}
	if !res.Get("valid").Bool() {
		return &ExitError{Code: 1, Msg: fmt.Sprintf("%s: invalid (%d error(s))", path, len(res.Get("errors").Array()))}
	}
	for _, w := range res.Get("workflows").Array() {
		fmt.Fprintf(stdout, "workflow %s: fingerprint %s\n", termsafe.String(w.Get("id").Str), w.Get("fingerprint").Str)
	}
	fmt.Fprintf(stdout, "%s: valid (%d warning(s))\n", path, len(res.Get("warnings").Array()))
	return nil
}
