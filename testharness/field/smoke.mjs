// The official client lists and calls tools through the gateway: the list carries the
// gateway's cache hints, a call answers.
import { connect, check, text, run } from './lib.mjs';

run(async () => {
  const { client } = await connect();
  const { tools } = await client.listTools();
  check(tools.length > 0, 'tools are listed');
  const echo = tools.find((t) => t.name === 'echo');
  check(echo, 'echo is listed', tools.map((t) => t.name));
  check(echo.description.endsWith('[Cache-Control: immutable]'), 'echo carries the immutable hint', echo.description);
  const other = tools.find((t) => t.name !== 'echo');
  check(other.description.endsWith('[Cache-Control: no-store]'), other.name + ' carries the no-store hint', other.description);
  const res = await client.callTool({ name: 'echo', arguments: { message: 'hello', text: 'hello' } });
  check(!res.isError && text(res).includes('hello'), 'echo answers through the gateway', res);
  await client.close();
});
