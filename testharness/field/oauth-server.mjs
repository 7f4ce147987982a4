// An MCP server that is an OAuth 2.1 resource server, built on the official TypeScript SDK's
// auth helpers (@modelcontextprotocol/sdk server/auth): requireBearerAuth answers a request
// without a valid token 401 with `WWW-Authenticate: Bearer ..., resource_metadata="<its own
// metadata URL>"` (getOAuthProtectedResourceMetadataUrl), and mcpAuthMetadataRouter serves
// its RFC 9728 metadata at /.well-known/oauth-protected-resource/mcp and, as the
// authorization server in this same process, static RFC 8414 metadata at
// /.well-known/oauth-authorization-server (no login: the one valid token is given).
// Written for stategate's field tests:
//
//   whoami    a digest of the Authorization header the server saw
//   echo      echoes
//
//   FIELD_OAUTH_TOKEN=TOKEN node oauth-server.mjs [--port N]
//
// Prints one line `listening http://127.0.0.1:PORT/mcp` once it accepts requests.
import { createHash } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { mcpAuthMetadataRouter, getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const token = process.env.FIELD_OAUTH_TOKEN;
if (!token) throw new Error('FIELD_OAUTH_TOKEN is not set');
let port = 0;
const i = process.argv.indexOf('--port');
if (i > 0) port = Number(process.argv[i + 1]);

const digest = (s) => createHash('sha256').update(String(s)).digest('hex');

function newServer() {
  const server = new Server({ name: 'stategate-field-oauth', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: 'whoami', description: 'A digest of the Authorization header the server saw.', inputSchema: { type: 'object' },
        annotations: { readOnlyHint: true } },
      { name: 'echo', description: 'Echo the text.', inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
        annotations: { readOnlyHint: true } },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const t = req.params.name === 'whoami'
      ? 'authorization sha256 ' + digest(extra?.requestInfo?.headers?.authorization ?? '')
      : String(req.params.arguments?.text ?? '');
    return { content: [{ type: 'text', text: t }] };
  });
  return server;
}

const app = createMcpExpressApp();
const httpServer = app.listen(port, '127.0.0.1', () => {
  const origin = `http://127.0.0.1:${httpServer.address().port}`;
  const mcpURL = new URL('/mcp', origin);
  app.use(mcpAuthMetadataRouter({
    resourceServerUrl: mcpURL,
    scopesSupported: ['mcp'],
    resourceName: 'stategate field OAuth server',
    oauthMetadata: {
      issuer: origin,
      authorization_endpoint: origin + '/authorize',
      token_endpoint: origin + '/token',
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
    },
  }));
  const verifier = {
    async verifyAccessToken(t) {
      if (t !== token) throw new InvalidTokenError('Unknown token');
      return { token: t, clientId: 'field', scopes: ['mcp'], expiresAt: Math.floor(Date.now() / 1000) + 3600 };
    },
  };
  const auth = requireBearerAuth({ verifier, resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpURL) });
  app.post('/mcp', auth, async (req, res) => {
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  const notAllowed = (_req, res) => res.status(405).set('Allow', 'POST').json({
    jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
  app.get('/mcp', auth, notAllowed);
  app.delete('/mcp', auth, notAllowed);
  console.log(`listening ${mcpURL.href}`);
});
