// A configuration written in YAML as people write it (field/everything-typo.yaml: a
// workflow keyed `on:` with states named off and on) gates server-everything's tools
// through the gateway, with the official client: get-sum is hidden and refused while the
// session's workflow is off, and answers once toggle-simulated-logging moved it on.
import { connect, check, text, run } from './lib.mjs';

const names = async (client) => (await client.listTools()).tools.map((t) => t.name);
const sum = (client) => client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } });

run(async () => {
  const { client } = await connect({ name: 'misconfig' });
  let listed = await names(client);
  check(listed.includes('toggle-simulated-logging') && !listed.includes('get-sum'),
    'in state off, get-sum is hidden (the YAML workflow was read with on: as a key)', listed);
  const refused = await sum(client);
  check(refused.isError && /not available/.test(text(refused)), 'get-sum is refused while off', text(refused));

  const on = await client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
  check(!on.isError, 'toggle-simulated-logging moves the workflow from off to on', text(on));
  listed = await names(client);
  check(listed.includes('get-sum'), 'in state on, get-sum is listed', listed);
  const ok = await sum(client);
  check(!ok.isError && text(ok).includes('5'), 'get-sum answers in state on', text(ok));

  const off = await client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
  check(!off.isError, 'toggling again moves it back off', text(off));
  await client.close();
});
