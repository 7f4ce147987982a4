package engine

import (
	"errors"

	"github.com/stategate/stategate/plugin/internal/chart"
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

// ResetSnapshot returns the snapshot that puts an instance of workflow, stored as old (a
// snapshot the gate wrote), in state to (the workflow's initial state when ""), with the
// next sequence number, and the state it leaves. It is what an operator's reset stores
// (the admin API's /admin/state/reset), with compare-and-set on old.
func (e *Engine) ResetSnapshot(workflow, to string, old []byte) (snapshot []byte, from string, err error) {
	var w *config.Workflow
	for _, c := range e.cfg.Workflows {
		if c.ID == workflow {
			w = c
		}
	}
	if w == nil {
		return nil, "", errors.New("no workflow of that name in the configuration")
	}
	conf := chart.Start(w)
	if to != "" {
		i, ok := w.StateIndex(to)
		if !ok {
			return nil, "", errors.New("workflow " + w.ID + " has no state " + to)
		}
		conf = chart.Enter(w, i)
	}
	from = gjson.GetBytes(old, "state").String() // a name, or compact JSON for a compound or parallel value
	seq := gjson.GetBytes(old, "seq").Int() + 1
	if seq <= 0 {
		seq = 1
	}
	return gate.AppendSnapshot(nil, w, &conf, seq), from, nil
}
