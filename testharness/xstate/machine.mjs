// A stategate workflow (docs/configuration.md) as a real XState v5 machine.
//
// The workflow's states are XState state nodes as they stand, with two adaptations that
// keep XState's own meaning:
//   - guards: the leaf guards {"type": "argument"|"result", "params"} are implemented here
//     (setup({guards})), read from the event {type, arguments, result}; the combinators
//     {"type": "and"|"or", "guards": [...]} and {"type": "not", "guard": G} become XState's
//     built-in and([...]), or([...]) and not(G), whose own objects carry the same members;
//   - "type": "normal" (stategate's older spelling of the default) is dropped.
import { setup, and, or, not } from 'xstate';

// read returns the value at a dotted path: object members by name, array items by a
// canonical index; anything else is undefined.
export function read(root, path) {
  let v = root;
  for (const seg of path.split('.')) {
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.prototype.hasOwnProperty.call(v, seg)) {
      v = v[seg];
    } else if (Array.isArray(v) && /^(0|[1-9][0-9]*)$/.test(seg) && Number(seg) < v.length) {
      v = v[Number(seg)];
    } else {
      return undefined;
    }
  }
  return v;
}

const scalar = (v) => v === null || ['string', 'number', 'boolean'].includes(typeof v);

export function check(v, { op, value }) {
  switch (op) {
    case 'exists': return v !== undefined;
    case 'eq': return scalar(v) && v === value;
    case 'ne': return !(scalar(v) && v === value);
    case 'lt': return typeof v === 'number' && v < value;
    case 'lte': return typeof v === 'number' && v <= value;
    case 'gt': return typeof v === 'number' && v > value;
    case 'gte': return typeof v === 'number' && v >= value;
    case 'in': return scalar(v) && value.some((x) => x === v);
  }
  throw new Error(`unknown op ${op}`);
}

const guards = {
  argument: ({ event }, params) => check(read(event.arguments, params.path), params),
  result: ({ event }, params) => check(read(event.result, params.path), params),
};

function guard(g) {
  switch (g.type) {
    case 'and': return and(g.guards.map(guard));
    case 'or': return or(g.guards.map(guard));
    case 'not': return not(guard(g.guard));
  }
  return { type: g.type, params: g.params };
}

function transition(t) {
  if (typeof t === 'string') return t;
  const out = { ...t };
  if (t.guard) out.guard = guard(t.guard);
  return out;
}

function transitions(v) {
  return Array.isArray(v) ? v.map(transition) : transition(v);
}

function node(n) {
  const out = { ...n };
  if (out.type === 'normal') delete out.type;
  if (n.on) out.on = Object.fromEntries(Object.entries(n.on).map(([e, t]) => [e, transitions(t)]));
  if (n.onDone) out.onDone = transitions(n.onDone);
  if (n.states) out.states = Object.fromEntries(Object.entries(n.states).map(([k, s]) => [k, node(s)]));
  return out;
}

// machineOf returns the XState machine of a workflow.
// maxIterations, when given, caps the microsteps of one event (XState loops forever on a
// definition whose onDone re-enters its own final state).
export function machineOf(w, maxIterations) {
  return setup({ guards }).createMachine({
    ...(maxIterations && { options: { maxIterations } }),
    id: w.id,
    initial: w.initial,
    states: Object.fromEntries(Object.entries(w.states).map(([k, s]) => [k, node(s)])),
  });
}
