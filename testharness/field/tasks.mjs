// MCP tasks through the gateway, with the official client's task API
// (client.experimental.tasks.callToolStream) in front of server-everything, whose
// simulate-research-query runs as a task (about 4 s). The gateway's configuration
// (field/everything-tasks.json) binds it to state "ready" of a session workflow, which
// echo reaches, and lets it invalidate echo.
import { connect, check, text, run } from './lib.mjs';

const TOOL = 'simulate-research-query';
const BLOCK = '[System: Cache invalidated for echo — caused by ' + TOOL + ']';

// drain collects a callToolStream's messages.
async function drain(stream, onCreated) {
  const msgs = [];
  for await (const m of stream) {
    msgs.push(m);
    if (m.type === 'taskCreated' && onCreated) await onCreated(m.task);
  }
  return msgs;
}

const taskCall = (client, topic) => client.experimental.tasks.callToolStream(
  { name: TOOL, arguments: { topic } }, undefined, { task: { ttl: 60000 } });

const listed = async (client) => (await client.listTools()).tools.find((t) => t.name === TOOL);

run(async () => {
  const { client } = await connect({ name: 'tasks' });
  check(client.getServerCapabilities()?.tasks, 'the tasks capability reaches the client', client.getServerCapabilities());

  // Refused out of its states: an error the task API shows, with what is possible now.
  const refused = await drain(taskCall(client, 'too early'));
  check(refused.length === 1 && refused[0].type === 'error', 'a refused task call ends in one error', refused);
  check(/not available now/.test(refused[0].error.message) && /Available now: echo/.test(refused[0].error.message),
    'the error says what is possible now', refused[0].error.message);
  check((await client.experimental.tasks.listTasks()).tasks.length === 0, 'the upstream never ran the refused call');

  const echoed = await client.callTool({ name: 'echo', arguments: { message: 'ready' } });
  check(!echoed.isError, 'echo moves the workflow to ready', echoed);
  const tool = await listed(client);
  check(tool?.execution?.taskSupport === 'required' || tool?.execution?.taskSupport === 'optional',
    "the tool's execution.taskSupport reaches the client", tool);

  // Admitted: the task is created untouched; the workflow does not move until it completes.
  let second;
  const msgs = await drain(taskCall(client, 'gateways'), async (task) => {
    check(typeof task.taskId === 'string' && task.status === 'working', 'the CreateTaskResult passes', task);
    check(await listed(client), 'the workflow has not moved when the task is created');
    second = drain(taskCall(client, 'twice')); // a second run of the step, while the first works
  });
  const result = msgs.find((m) => m.type === 'result');
  check(result, 'the task completes with a result', msgs.map((m) => m.type));
  check(result.result.content[0].type === 'text' && result.result.content[0].text === BLOCK,
    'tasks/result carries the invalidation block at content[0]', result.result.content[0]);
  check(text(result.result).includes('Research Report'), 'the research report follows', text(result.result).slice(0, 200));
  check(!(await listed(client)), 'the completed task moved the workflow (the tool is hidden in "done")');

  const again = await second;
  check(again.length === 1 && again[0].type === 'error', 'the concurrent second run was refused', again);
  check((await client.experimental.tasks.listTasks()).tasks.length === 1, 'the upstream ran the step once');
  console.log('second run refused with: ' + again[0].error.message);

  // A cancelled task never moves the workflow.
  await client.callTool({ name: 'echo', arguments: { message: 'ready again' } });
  let cancelled;
  const c = await drain(taskCall(client, 'cancel me'), async (task) => {
    cancelled = await client.experimental.tasks.cancelTask(task.taskId);
  });
  check(cancelled?.status === 'cancelled', 'tasks/cancel passes through', cancelled);
  check(c.some((m) => m.type === 'error'), 'the cancelled task ends in an error', c.map((m) => m.type));
  check(await listed(client), 'a cancelled task does not move the workflow');
  await client.close();
});
