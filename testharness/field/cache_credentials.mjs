// Credentials and the response cache (issue 24): two official clients with two bearer
// tokens call the stateless server's whoami, which the gateway caches (immutable). Each
// caller gets the answer the server gives its own token; the same token in a new client is
// answered from the cache.
import { createHash } from 'node:crypto';
import { connect, check, text, run } from './lib.mjs';

const CACHE = 'dev.stategate/cache';
const expected = (token) => 'caller ' + createHash('sha256').update('Bearer ' + token).digest('hex').slice(0, 16);
const as = (token) => connect({ headers: { Authorization: 'Bearer ' + token }, name: 'field-' + token });

run(async () => {
  const tokens = [process.env.TOKEN_A ?? 'token-a', process.env.TOKEN_B ?? 'token-b'];
  const first = [];
  for (const token of tokens) {
    const { client } = await as(token);
    const res = await client.callTool({ name: 'whoami', arguments: {} });
    check(!res.isError && text(res) === expected(token), `whoami with token ${tokens.indexOf(token) + 1} answers for that token`, res);
    check(!res._meta?.[CACHE], `token ${tokens.indexOf(token) + 1}'s first call reaches the server`, res._meta);
    first.push(client);
  }
  for (const [i, token] of tokens.entries()) {
    const { client } = await as(token);
    const res = await client.callTool({ name: 'whoami', arguments: {} });
    check(text(res) === expected(token), `token ${i + 1} in a new client still gets its own answer`, res);
    check(res._meta?.[CACHE]?.hit === true, `token ${i + 1} in a new client is answered from the cache`, res._meta);
    await client.close();
  }
  const anon = await connect({ name: 'field-anonymous' });
  const res = await anon.client.callTool({ name: 'whoami', arguments: {} });
  check(text(res) === 'anonymous' && !res._meta?.[CACHE], 'a caller without a token reaches the server and is anonymous', res);
  await anon.client.close();
  for (const c of first) await c.close();
});
