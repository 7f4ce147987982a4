// A stateless MCP server on the official TypeScript SDK (@modelcontextprotocol/sdk): every
// POST stands alone (`sessionIdGenerator: undefined`), no Mcp-Session-Id is issued and GET
// answers 405, as most hosted servers do. Written for stategate's field tests; the tools are
// plain and know nothing of stategate:
//
//   cart_add {sku}    adds an item (a step of a checkout, when a gateway gates it)
//   cart_pay {amount} pays
//   whoami            a digest of the Authorization header the server saw ("anonymous")
//   echo {text}       echoes
//
//   node stateless.mjs [--port N]     (0 or absent: a free port)
//
// Prints one line `listening http://127.0.0.1:PORT/mcp` on stdout once it accepts requests.
import { createHash } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { CallToolRequestSchema, ListToolsRequestSchema, McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const obj = (props, required = []) => ({ type: 'object', properties: props, required });

const tools = [
  { name: 'cart_add', description: 'Add an item to the cart.', inputSchema: obj({ sku: { type: 'string' } }, ['sku']),
    run: (a) => text(`added ${a.sku}`) },
  { name: 'cart_pay', description: 'Pay for the cart.', inputSchema: obj({ amount: { type: 'number' } }),
    run: (a) => text(`paid ${a.amount ?? 0}`) },
  { name: 'whoami', description: 'Who the server thinks the caller is.', inputSchema: obj({}),
    annotations: { readOnlyHint: true },
    run: (_a, extra) => {
      const auth = extra?.requestInfo?.headers?.authorization;
      return text(auth ? 'caller ' + createHash('sha256').update(String(auth)).digest('hex').slice(0, 16) : 'anonymous');
    } },
  { name: 'echo', description: 'Echo the text.', inputSchema: obj({ text: { type: 'string' } }),
    annotations: { readOnlyHint: true }, run: (a) => text(String(a.text ?? '')) },
];

function newServer() {
  const server = new Server({ name: 'stategate-field-stateless', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map(({ run, ...t }) => t),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const t = tools.find((x) => x.name === req.params.name);
    if (!t) throw new McpError(ErrorCode.InvalidParams, `unknown tool ${req.params.name}`);
    return t.run(req.params.arguments ?? {}, extra);
  });
  return server;
}

let port = 0;
const i = process.argv.indexOf('--port');
if (i > 0) port = Number(process.argv[i + 1]);

const app = createMcpExpressApp();
app.post('/mcp', async (req, res) => {
  const server = newServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => { transport.close(); server.close(); });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});
const notAllowed = (_req, res) => res.status(405).set('Allow', 'POST').json({
  jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
app.get('/mcp', notAllowed);
app.delete('/mcp', notAllowed);

const httpServer = app.listen(port, '127.0.0.1', () => {
  console.log(`listening http://127.0.0.1:${httpServer.address().port}/mcp`);
});
