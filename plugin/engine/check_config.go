package engine

import (
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/jsonx"
)

// CheckConfig reports a configuration's validity, errors and warnings without an Engine:
// {"valid", "errors", "warnings", "workflows":[{"id","fingerprint"}]}.
func CheckConfig(cfg []byte) []byte {
	eng, err := New(cfg)
	if err != nil {
		var errs []string
		if ee, ok := err.(*Error); ok {
			errs = ee.Details
			if len(errs) == 0 {
				errs = []string{ee.Message}
			}
		}
		_, problems := config.Parse(cfg)
		dst := append([]byte(nil), `{"valid":false,"errors":`...)
		dst = appendStrings(dst, errs)
		dst = append(dst, `,"warnings":`...)
		dst = appendStrings(dst, warningStrings(problems))
		return append(dst, `,"workflows":[]}`...)
	}
	return eng.checkConfig(nil)
}

func (e *Engine) checkConfig(dst []byte) []byte {
	dst = append(dst, `{"valid":true,"errors":[],"warnings":`...)
	dst = appendStrings(dst, warningStrings(e.warnings))
	dst = append(dst, `,"workflows":[`...)
	for i, w := range e.cfg.Workflows {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = jsonx.AppendString(dst, w.ID)
		dst = append(dst, `,"fingerprint":`...)
		dst = jsonx.AppendString(dst, w.Fingerprint)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

func warningStrings(problems []config.Problem) []string {
	out := []string{}
	for _, p := range problems {
		if p.Warning {
			out = append(out, p.String())
		}
	}
	return out
}
