// The official client over Streamable HTTP through the gateway to a server of another
// transport (legacy HTTP+SSE, or stdio behind `serve -- COMMAND`): the list carries the
// hints, get-sum is refused until echo moved the workflow, then reaches the server; a
// second client's session starts afresh (its own upstream session, its own workflow).
import { connect, check, text, run } from './lib.mjs';

const sum = { name: 'get-sum', arguments: { a: 2, b: 3 } };

run(async () => {
  const a = await connect({ name: 'client-a' });
  const { tools } = await a.client.listTools();
  const names = tools.map((t) => t.name);
  check(names.includes('echo'), 'the server\'s tools are listed', names);
  check(!names.includes('get-sum'), 'get-sum is hidden before echo', names);
  const echo = tools.find((t) => t.name === 'echo');
  check(echo.description.endsWith('[Cache-Control: no-store]'), 'echo carries its hint', echo.description);

  const refused = await a.client.callTool(sum);
  check(refused.isError && text(refused).includes('is not available now') && text(refused).includes('echo'),
    'get-sum is refused (answered, not left hanging) before echo', refused);

  const echoed = await a.client.callTool({ name: 'echo', arguments: { message: 'hello' } });
  check(!echoed.isError && text(echoed).includes('hello'), 'echo reaches the server', echoed);
  check(text(echoed).includes('Cache invalidated for get-sum'), 'echo\'s answer carries the invalidation block', text(echoed));

  const summed = await a.client.callTool(sum);
  check(!summed.isError && text(summed).includes('5'), 'the workflow advanced: get-sum reaches the server', summed);
  const after = await a.client.listTools();
  const sumTool = after.tools.find((t) => t.name === 'get-sum');
  check(sumTool && sumTool.description.endsWith('[Cache-Control: immutable]'), 'get-sum is listed now, with its hint', after.tools.map((t) => t.name));

  const b = await connect({ name: 'client-b' });
  const fresh = await b.client.callTool(sum);
  check(fresh.isError && text(fresh).includes('is not available now'), 'a second client\'s session starts afresh', fresh);
  const bEcho = await b.client.callTool({ name: 'echo', arguments: { message: 'from b' } });
  check(!bEcho.isError && text(bEcho).includes('from b'), 'the second client reaches the server on its own session', bEcho);
  const again = await a.client.callTool({ name: 'echo', arguments: { message: 'still a' } });
  check(!again.isError && text(again).includes('still a'), 'the first client\'s session still works', again);
  await b.transport.terminateSession();
  await b.client.close();
  await a.transport.terminateSession();
  await a.client.close();
});
