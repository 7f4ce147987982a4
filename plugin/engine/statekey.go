package engine

import (
	"errors"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/gate"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// StateKey returns the storage key under which the workflow named workflow keeps its
// state for value (a session id for a session-keyed workflow, a handle for a
// handle-keyed one) and principal: the same key the gate derives for a call, so an
// operator can look a workflow's state up (the admin API's /admin/state).
func (e *Engine) StateKey(workflow, principal, value string) (string, error) {
	var w *config.Workflow
	for _, c := range e.cfg.Workflows {
		if c.ID == workflow {
			w = c
		}
	}
	if w == nil {
		return "", errors.New("no workflow of that name in the configuration")
	}
	s := &gate.Scope{Principal: principal}
	if w.Key == config.KeySession {
		s.Session = value
	} else {
		args := append([]byte{'{'}, jsonx.AppendString(nil, w.KeyArg)...)
		args = append(args, ':')
		args = jsonx.AppendString(args, value)
		s.Args = gjson.ParseBytes(append(args, '}'))
	}
	key, _, st := gate.Key(w, s)
	if st != gate.KeyOK {
		return "", errors.New("no state key for that value (empty, or too long)")
	}
	return key, nil
}
