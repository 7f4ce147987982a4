// The official TypeScript MCP client (@modelcontextprotocol/sdk) reading results that
// stategate's decorate_result cut to fit maxResponseBytes.
//
// Client.callTool (dist/esm/client/index.js, 1.32) checks every result of a tool whose
// tools/list entry has an outputSchema:
//
//     if (!result.structuredContent && !result.isError) throw McpError(... "has an output
//         schema but did not return structured content")
//     if (result.structuredContent) validate it against the schema, throwing on a mismatch
//
// So a cut result must either keep structuredContent whole, or be an isError result.
//
// The path is the real one, bytes included: a Streamable HTTP MCP server built with the
// SDK (in process, JSON responses), the SDK's Streamable HTTP client, and between them a
// fetch that hands each tools/call answer, as received, to build/stategate.wasm running
// under the Node Extism host (@extism/extism), as a gateway would.
//
// Run: node --test (STATEGATE_WASM names the module; default ../../build/stategate.wasm).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

// node:wasi warns that it is experimental; keep stderr for real problems.
process.removeAllListeners('warning');
process.on('warning', (w) => {
  if (w.name === 'ExperimentalWarning' && /WASI/.test(w.message)) return;
  process.stderr.write(`${w.name}: ${w.message}\n`);
});
const { default: createPlugin } = await import('@extism/extism');

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const wasmPath = process.env.STATEGATE_WASM || here('../../build/stategate.wasm');
// maxResponseBytes 1024; reports.build invalidates reports.* (the vectors' small-limit config).
const configPath = here('../../abi/testdata/config/small-limit.json');
const LIMIT = 1024;
const TRUNCATED = 'dev.stategate/truncated';

// The upstream's tools: each declares an outputSchema, so the client checks structuredContent.
const rowsSchema = {
  type: 'object',
  properties: { count: { type: 'integer' }, rows: { type: 'array', items: { type: 'integer' } } },
  required: ['count', 'rows'],
  additionalProperties: false,
};
const tools = [
  {
    name: 'reports.list',
    description: 'List report rows.',
    inputSchema: { type: 'object', properties: { count: { type: 'integer' } } },
    outputSchema: rowsSchema,
  },
  {
    name: 'reports.build',
    description: 'Build a report (a mutation: its success invalidates reports.*).',
    inputSchema: { type: 'object', properties: { count: { type: 'integer' } } },
    outputSchema: rowsSchema,
  },
  {
    name: 'reports.summary',
    description: 'Summarise the quarter: a long text, a small structured total.',
    inputSchema: { type: 'object' },
    outputSchema: {
      type: 'object',
      properties: { total: { type: 'number' }, currency: { type: 'string' } },
      required: ['total', 'currency'],
      additionalProperties: false,
    },
  },
];

function answer(name, args) {
  if (name === 'reports.summary') {
    const structured = { total: 1200, currency: 'EUR' };
    return { content: [{ type: 'text', text: 'Summary of the quarter. '.repeat(200) }], structuredContent: structured };
  }
  const count = args?.count ?? 3;
  const structured = { count, rows: Array.from({ length: count }, (_, i) => i) };
  return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
}

// upstream answers one HTTP request as a stateless MCP server built with the SDK.
async function upstream(request) {
  const server = new Server({ name: 'reports', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => answer(req.params.name, req.params.arguments));
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  return transport.handleRequest(request);
}

let plugin;

before(async () => {
  const module = await WebAssembly.compile(await readFile(wasmPath));
  const config = await readFile(configPath, 'utf8');
  plugin = await createPlugin({ wasm: [{ module }] }, { useWasi: true, config: { config } });
});

after(async () => {
  await plugin?.close();
});

// decorate runs decorate_result on one upstream answer (its bytes as received) and
// answers the decorated message's bytes and what the engine reported.
async function decorate(tool, body) {
  const input = `{"tool":${JSON.stringify(tool)},"message":${body}}`;
  let out;
  try {
    out = JSON.parse((await plugin.call('decorate_result', input)).text());
  } finally {
    await plugin.reset();
  }
  assert.equal(out.error, undefined, `decorate_result failed: ${JSON.stringify(out.error)}`);
  return { body: JSON.stringify(out.message), out };
}

// connect returns a client whose requests reach the upstream through a gateway fetch:
// tools/call answers go through decorate_result, then through rewrite (a test's change).
async function connect(rewrite = (msg) => msg) {
  const seen = [];
  const gateway = async (url, init) => {
    const request = new Request(url, init);
    const sent = init?.body ? JSON.parse(init.body) : null;
    const response = await upstream(request);
    if (sent?.method !== 'tools/call' || !response.headers.get('content-type')?.includes('application/json')) {
      return response;
    }
    const original = await response.text();
    const { body, out } = await decorate(sent.params.name, original);
    const rewritten = JSON.stringify(rewrite(JSON.parse(body)));
    seen.push({ original, body, out });
    const headers = new Headers(response.headers);
    headers.delete('content-length');
    return new Response(rewritten, { status: response.status, headers });
  };
  const client = new Client({ name: 'strict-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL('http://upstream.test/mcp'), { fetch: gateway }));
  await client.listTools(); // caches the outputSchema validators callTool applies
  return { client, seen };
}

test('a result within the limit passes unchanged', async () => {
  const { client, seen } = await connect();
  const result = await client.callTool({ name: 'reports.list', arguments: { count: 3 } });
  assert.deepEqual(result.structuredContent, { count: 3, rows: [0, 1, 2] });
  assert.equal(seen[0].out.truncated, null);
  assert.equal(seen[0].body, seen[0].original);
  await client.close();
});

test('text is cut and structuredContent kept whole when it fits', async () => {
  const { client, seen } = await connect();
  const result = await client.callTool({ name: 'reports.summary', arguments: {} });
  assert.ok(Buffer.byteLength(seen[0].original) > LIMIT);
  assert.ok(Buffer.byteLength(seen[0].body) <= LIMIT, `${Buffer.byteLength(seen[0].body)} bytes`);
  assert.deepEqual(result.structuredContent, { total: 1200, currency: 'EUR' });
  assert.equal(result.isError, undefined);
  assert.match(result.content.at(-1).text, /Result truncated to fit the gateway's 1024-byte limit/);
  assert.equal(result._meta[TRUNCATED].limitBytes, LIMIT);
  assert.equal(result._meta[TRUNCATED].structuredContentDropped, undefined);
  await client.close();
});

test('a success whose structuredContent cannot fit is withheld, and the client accepts it', async () => {
  const { client, seen } = await connect();
  const result = await client.callTool({ name: 'reports.list', arguments: { count: 400 } });
  assert.ok(Buffer.byteLength(seen[0].body) <= LIMIT);
  assert.equal(result.isError, true);
  assert.equal(result.structuredContent, undefined);
  assert.equal(result.content.length, 1);
  const text = result.content[0].text;
  assert.match(text, /Result withheld: the tool succeeded/);
  assert.match(text, /over the gateway's 1024-byte limit/);
  assert.match(text, /Ask for less data/);
  assert.deepEqual(result._meta[TRUNCATED], {
    originalBytes: Buffer.byteLength(seen[0].original),
    limitBytes: LIMIT,
    structuredContentDropped: true,
    resultWithheld: true,
  });
  assert.equal(seen[0].out.truncated.resultWithheld, true);
  await client.close();
});

test('a withheld mutation keeps the invalidation block first', async () => {
  const { client, seen } = await connect();
  const result = await client.callTool({ name: 'reports.build', arguments: { count: 400 } });
  assert.equal(result.isError, true);
  assert.equal(result.content[0].text, '[System: Cache invalidated for reports.* \u2014 caused by reports.build]');
  assert.match(result.content[1].text, /Result withheld/);
  assert.deepEqual(seen[0].out.invalidated.patterns, ['reports.*']);
  await client.close();
});

test('the old shape, structuredContent removed and isError absent, makes the client throw', async () => {
  // What decorate_result answered before: the same cut result without isError.
  const { client } = await connect((msg) => {
    delete msg.result.isError;
    return msg;
  });
  await assert.rejects(
    client.callTool({ name: 'reports.list', arguments: { count: 400 } }),
    /Tool reports\.list has an output schema but did not return structured content/,
  );
  await client.close();
});

test('a cut structuredContent makes the client throw', async () => {
  // Why structuredContent is never cut: a partial object does not match the schema.
  const { client } = await connect((msg) => {
    delete msg.result.isError;
    msg.result.structuredContent = { rows: [0, 1, 2] };
    return msg;
  });
  await assert.rejects(
    client.callTool({ name: 'reports.list', arguments: { count: 400 } }),
    /Structured content does not match the tool's output schema/,
  );
  await client.close();
});
