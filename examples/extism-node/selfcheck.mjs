// selfcheck.mjs: the run `node gateway.mjs` makes without --upstream, beside the page (it is
// a demo of the host, not part of it; the page hands it serve, listen and readBody, so this
// file imports nothing of the page): a real exchange through the gateway in front of a tiny
// built-in upstream, printed as a JSON summary.
import http from 'node:http';

// selfCheck drives a real exchange through the gateway in front of a tiny upstream that
// answers tools/list and tools/call and records the calls it ran.
export async function selfCheck(ex, { serve, listen, readBody }) {
  const calls = [];
  const tools = ['cart.view', 'cart.add_item', 'cart.checkout', 'cart.pay', 'countries.list'].map((name) => ({ name, description: `The ${name} tool.`, inputSchema: { type: 'object' } }));
  const upstream = http.createServer(async (req, res) => {
    const msg = JSON.parse(await readBody(req, 1 << 20));
    if (msg.method === 'tools/call') calls.push(msg.params.name);
    const result = msg.method === 'tools/list' ? { tools } : { content: [{ type: 'text', text: `${msg.params?.name} done` }] };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
  });
  const server = await serve(ex, `http://127.0.0.1:${(await listen(upstream, '127.0.0.1:0')).port}/mcp`, '127.0.0.1:0');
  let id = 0;
  const headers = { 'content-type': 'application/json', accept: 'application/json', 'mcp-session-id': 'demo-session', 'mcp-protocol-version': '2025-06-18' };
  const rpc = (method, params) => fetch(`http://127.0.0.1:${server.address().port}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }) }).then((r) => r.json());
  try {
    const names = (m) => m.result.tools.map((t) => t.name);
    const before = await rpc('tools/list', {});
    const pay = await rpc('tools/call', { name: 'cart.pay', arguments: {} });
    const add = await rpc('tools/call', { name: 'cart.add_item', arguments: { sku: 'book' } });
    const after = await rpc('tools/list', {});
    return {
      toolsBefore: names(before),
      description: before.result.tools.find((t) => t.name === 'countries.list').description,
      payDenied: pay.result._meta['dev.stategate/error'].code,
      addItemText: add.result.content.map((c) => c.text),
      toolsAfter: names(after),
      upstreamCalls: calls,
      stored: Object.fromEntries(ex.store.map),
    };
  } finally {
    server.close();
    upstream.close();
  }
}
