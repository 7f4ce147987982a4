// Gateway sessions in front of a stateless server (one that issues no Mcp-Session-Id), with
// the gateway configured by stateless.json (cart_add then cart_pay, a session-keyed
// workflow). SCENARIO picks what is checked, so each claim passes or fails on its own:
//
//   workflow       the workflow advances: cart_pay is listed and admitted after cart_add
//   list_changed   notifications/tools/list_changed reaches the client after cart_add
//   two_clients    two clients get different gateway sessions, never sent to the server,
//                  and separate workflow states
//   delete         DELETE ends the session: a later request with it gets 404, and the client
//                  initializes again into a fresh session
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, gatewayURL, check, text, run } from './lib.mjs';

const PREFIX = 'stategate.';

const listed = async (client, name) => (await client.listTools()).tools.some((t) => t.name === name);
const pay = (client) => client.callTool({ name: 'cart_pay', arguments: { amount: 5 } });
const refused = (res) => res.isError === true && text(res).includes('not available now');

async function add(client) {
  const res = await client.callTool({ name: 'cart_add', arguments: { sku: 'A1' } });
  check(!res.isError && text(res).includes('added A1'), 'cart_add runs', res);
}

const scenarios = {
  async workflow() {
    const { client } = await connect();
    check(!(await listed(client, 'cart_pay')), 'cart_pay is hidden before cart_add');
    await add(client);
    check(await listed(client, 'cart_pay'), 'cart_pay is listed after cart_add');
    const res = await pay(client);
    check(!res.isError && text(res).includes('paid 5'), 'step two (cart_pay) is admitted after step one', res);
    await client.close();
  },

  async list_changed() {
    const { client } = await connect();
    let notified;
    const arrived = new Promise((resolve) => { notified = resolve; });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => notified(true));
    await add(client);
    const got = await Promise.race([arrived, new Promise((resolve) => setTimeout(resolve, 5000, false))]);
    check(got, 'notifications/tools/list_changed reached the client');
    await client.close();
  },

  async two_clients() {
    const a = await connect({ name: 'client-a' });
    const b = await connect({ name: 'client-b' });
    const [idA, idB] = [a.transport.sessionId, b.transport.sessionId];
    check(idA?.startsWith(PREFIX) && idB?.startsWith(PREFIX), 'both clients got a gateway session', [idA, idB]);
    check(idA !== idB, 'the two clients got different sessions', [idA, idB]);
    check(/^[\x21-\x7e]+$/.test(idA), 'the session id is visible ASCII', idA);
    const seen = await a.client.callTool({ name: 'seen_session', arguments: {} });
    check(text(seen) === 'none', 'the server was not sent the session id', text(seen));
    await add(a.client);
    const other = await pay(b.client);
    check(refused(other), "cart_pay is refused in client B's session (its workflow is its own)", other);
    const own = await pay(a.client);
    check(!own.isError, "cart_pay is admitted in client A's", own);
    await a.client.close();
    await b.client.close();
  },

  async delete() {
    const { client, transport } = await connect();
    const id = transport.sessionId;
    check(id?.startsWith(PREFIX), 'the client got a gateway session', id);
    await add(client);
    await transport.terminateSession();
    await client.close();
    // A client that still holds the ended id (the SDK reconnects with it, skipping initialize).
    const stale = new Client({ name: 'stale', version: '1.0.0' });
    await stale.connect(new StreamableHTTPClientTransport(gatewayURL(), { sessionId: id }));
    let status;
    try {
      await stale.callTool({ name: 'echo', arguments: { text: 'hi' } });
    } catch (err) {
      status = err instanceof StreamableHTTPError ? err.code : String(err);
    }
    check(status === 404, 'a request with the ended session gets 404', status);
    await stale.close();
    const again = await connect({ name: 'again' });
    const id2 = again.transport.sessionId;
    check(id2?.startsWith(PREFIX) && id2 !== id, 'the client initializes again into a new session', id2);
    check(refused(await pay(again.client)), 'the new session starts its workflow afresh');
    await again.client.close();
  },
};

run(async () => {
  const s = scenarios[process.env.SCENARIO];
  if (!s) throw new Error(`SCENARIO must be one of ${Object.keys(scenarios).join(', ')}`);
  await s();
});
