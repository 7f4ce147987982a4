// OAuth discovery through the gateway with the official TypeScript client
// (@modelcontextprotocol/sdk client/auth.js), in front of oauth-server.mjs (a resource server
// on the SDK's server auth helpers). GATEWAY_URL is the MCP endpoint the client uses,
// FIELD_OAUTH_TOKEN the one token the server accepts.
//
//   1. Without a token, the client's StreamableHTTPClientTransport gets the 401, reads the
//      challenge's resource_metadata, and its authProvider flow (auth()) discovers the
//      protected-resource metadata and the authorization server, then starts an
//      authorization whose resource indicator is the gateway's URL: the SDK itself refuses
//      metadata whose resource is not the URL it used (selectResourceURL).
//   2. discoverOAuthProtectedResourceMetadata (path-aware, then root) and the legacy
//      discovery of the authorization server at the gateway's origin find the documents.
//   3. With the token, a call reaches the server with the Authorization header intact.
import { createHash } from 'node:crypto';
import {
  UnauthorizedError, discoverOAuthProtectedResourceMetadata, discoverAuthorizationServerMetadata,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { check, connect, gatewayURL, run, text } from './lib.mjs';

const token = process.env.FIELD_OAUTH_TOKEN;

// provider is an OAuthClientProvider with a pre-registered client that records what the
// SDK's flow did instead of opening a browser.
function provider(tokens) {
  const seen = {};
  return {
    seen,
    get redirectUrl() { return 'http://127.0.0.1:1/callback'; },
    get clientMetadata() { return { redirect_uris: ['http://127.0.0.1:1/callback'], client_name: 'stategate-field' }; },
    clientInformation() { return { client_id: 'field-client' }; },
    tokens() { return tokens; },
    saveTokens(t) { seen.savedTokens = t; },
    saveCodeVerifier(v) { seen.codeVerifier = v; },
    codeVerifier() { return seen.codeVerifier; },
    redirectToAuthorization(u) { seen.authorizationUrl = u; },
    saveDiscoveryState(s) { seen.discovery = s; },
    discoveryState() { return undefined; },
  };
}

run(async () => {
  const url = gatewayURL();

  // 1. The transport's own flow on the 401.
  const p = provider(undefined);
  let err;
  try {
    await connect({ authProvider: p });
  } catch (e) {
    err = e;
  }
  check(err instanceof UnauthorizedError, 'without a token the client is sent to authorize', String(err?.stack ?? err));
  const authURL = p.seen.authorizationUrl;
  check(authURL !== undefined, 'the SDK discovered the metadata through the gateway and started an authorization', p.seen);
  check(authURL.searchParams.get('resource') === url.href,
    `the authorization's resource indicator is the gateway's URL (${url.href})`, authURL.href);
  const d = p.seen.discovery;
  check(d?.resourceMetadata?.resource === url.href, 'the protected-resource metadata names the gateway', d?.resourceMetadata);
  check(d.resourceMetadata.scopes_supported?.[0] === 'mcp' && d.resourceMetadata.resource_name === 'stategate field OAuth server',
    'the rest of the metadata is the server\'s', d.resourceMetadata);
  check(authURL.pathname === '/authorize' && String(d.authorizationServerUrl) === d.resourceMetadata.authorization_servers[0],
    'the authorization server is the one the metadata names', { auth: authURL.href, as: d.authorizationServerUrl });

  // 2. The discovery functions, pointed at the gateway.
  const prm = await discoverOAuthProtectedResourceMetadata(url);
  check(prm.resource === url.href, 'discoverOAuthProtectedResourceMetadata finds the gateway\'s resource', prm);
  const asm = await discoverAuthorizationServerMetadata(new URL('/', url));
  check(asm?.authorization_endpoint === d.resourceMetadata.authorization_servers[0] + '/authorize',
    'the authorization server metadata at the gateway\'s origin (legacy discovery) is the server\'s', asm);

  // 3. With the token.
  const { client } = await connect({ authProvider: provider({ access_token: token, token_type: 'Bearer' }) });
  const tools = await client.listTools();
  check(tools.tools.some((t) => t.name === 'whoami'), 'with the token the tools are listed', tools);
  const who = text(await client.callTool({ name: 'whoami', arguments: {} }));
  const want = 'authorization sha256 ' + createHash('sha256').update('Bearer ' + token).digest('hex');
  check(who === want, 'the server saw the Authorization header byte for byte', who);
  await client.close();
});
