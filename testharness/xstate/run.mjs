// Runs workflows and calls through the real xstate package: for each case, the state value
// at the start and, per call, whether the gate allows it (any of the tool's states
// matches: snapshot.matches) and the state value after it (a successful allowed call
// sends its event {type, arguments, result}). Reads {"cases": [...]} as JSON on stdin and
// writes {"results": [...]} (testharness/xstate_test.go).
import { getInitialSnapshot, transition } from 'xstate';
import { machineOf } from './machine.mjs';

let input = '';
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) input += chunk;
const { cases } = JSON.parse(input);
const results = cases.map(({ workflow, calls }) => {
  try {
    const machine = machineOf(workflow, 1000);
    let snap = getInitialSnapshot(machine);
    if (snap.status === 'error') throw snap.error;
    const initial = snap.value;
    const steps = calls.map(({ tool, success, arguments: args, result }) => {
      const b = workflow.tools[tool];
      const allowed = b.states.some((p) => snap.matches(p));
      if (allowed && success && b.event && snap.status === 'active') {
        [snap] = transition(machine, snap, { type: b.event, arguments: args, result });
      }
      return { allowed, value: snap.value, status: snap.status };
    });
    return { initial, steps };
  } catch (err) {
    return { error: String(err && err.message || err) };
  }
});
process.stdout.write(JSON.stringify({ results }));
