// Shared by the field scenarios: the official TypeScript client (@modelcontextprotocol/sdk)
// connected to the gateway, and small checks that fail the script with a reason.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const gatewayURL = () => {
  const u = process.env.GATEWAY_URL;
  if (!u) throw new Error('GATEWAY_URL is not set');
  return new URL(u);
};

// connect returns a connected client (session era, the SDK's latest protocol version) and
// its transport. opts: {headers, capabilities, name}.
export async function connect(opts = {}) {
  const client = new Client({ name: opts.name ?? 'stategate-field', version: '1.0.0' },
    { capabilities: opts.capabilities ?? {} });
  const transport = new StreamableHTTPClientTransport(opts.url ?? gatewayURL(),
    { requestInit: { headers: opts.headers ?? {} }, authProvider: opts.authProvider });
  await client.connect(transport);
  return { client, transport };
}

// text joins a result's text blocks.
export const text = (res) => (res?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

export function check(ok, what, got) {
  if (!ok) {
    const detail = got === undefined ? '' : '\n  got: ' + (typeof got === 'string' ? got : JSON.stringify(got));
    console.error('FAIL: ' + what + detail);
    process.exit(1);
  }
  console.log('ok: ' + what);
}

// run runs main and fails the script on any uncaught error.
export function run(main) {
  main().then(() => process.exit(0), (err) => {
    console.error('FAIL: ' + (err?.stack ?? err));
    process.exit(1);
  });
}
