// gateway.mjs: an MCP gateway in one page. The MCP exchange (admission, the workflow gate,
// leases, answer rewriting, gateway sessions, SSE, size limits, timeouts) runs inside the
// stategate exchange module (build/stategate-exchange.wasm, `make build.exchange`), loaded
// with @extism/extism 1.0.3 from manifest.json. This host does I/O only, as abi/ABI.md
// ("Write a host in one page") says: an HTTP listener, an HTTP client to the upstream, a Map
// with compare-and-set behind the two host functions, and the loop of calls:
//
//   http_request -> answer | wait (sleep, ask again) | stream (hold a GET open) | forward
//   forward -> the upstream -> http_answer (once for JSON, per chunk for SSE) -> the client
//           -> http_timeout when the exchange's timeoutMs passes first
//           -> http_answer {"error": unreachable | broken | cancelled} when the I/O fails
//
//   node gateway.mjs         a self-contained run against a tiny built-in upstream (JSON summary)
//   node gateway.mjs --upstream URL [--listen HOST:PORT] [--manifest PATH]
//                    [--allowed-origins A,B] [--allowed-hosts H,I] [--public-url ORIGIN]
//                    [--named-exports]
//
// --public-url is the origin clients reach this gateway at (default http://HOST:PORT of
// --listen; none, said on stderr, when HOST is a wildcard (0.0.0.0, ::, empty) or PORT is 0):
// OAuth discovery documents and challenges name it (without one they pass unchanged).
//
// The calls go through the module's raw entry (abi/ABI.md: stategate_alloc writes the input
// straight into the module's memory, stategate_call answers where the output lies), which
// @extism/extism allows: getInstance() is the module's WebAssembly.Instance, exports and
// memory. Through the named exports go-pdk would move input and output 8 bytes per call
// into the SDK's kernel; --named-exports calls those anyway (a host that cannot reach the
// instance), as does a module without the raw entry.
//
// What it leaves to a real deployment: one process (state is a Map; replicas need a shared
// store with an atomic compare-and-set, e.g. Redis with a small Lua script, reached from a
// worker since host functions are synchronous here), one plugin instance with its calls
// queued (a real host pools instances and replaces one that traps), no TLS, no metrics.
//
// @extism/extism 1.0.3 quirks: the config is read only from createPlugin's options (a
// manifest's is ignored, and "" throws); memory and timeout limits are not enforced; call()
// answers a PluginOutput or null; the host frees nothing between calls, hence reset() after
// each (copy the output first: its bytes live in the plugin's memory); an input Uint8Array
// is stored as its whole .buffer (see frame); host functions are
// `functions: {"extism:host/user": {name(callContext, offset) -> offset}}` with bigint
// offsets, read with callContext.read(offset) and answered with callContext.store(text),
// and they must be synchronous.
import http from 'node:http';
import https from 'node:https';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';

process.removeAllListeners('warning'); // node:wasi warns that it is experimental
process.on('warning', (w) => w.name === 'ExperimentalWarning' || process.stderr.write(`${w.name}: ${w.message}\n`));
const { default: createPlugin } = await import('@extism/extism');

const here = path.dirname(fileURLToPath(import.meta.url));
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'proxy-connection']);
const NEVER_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const pairs = (raw) => raw.flatMap((v, i) => (i % 2 ? [] : [[v, raw[i + 1]]])); // rawHeaders -> [[name, value]]

// MemoryStore is the whole state of one process: strings by key, written with compare-and-set.
export class MemoryStore {
  map = new Map();
  get = (keys) => keys.map((k) => this.map.get(k) ?? null);
  cas({ key, prev, next }) {
    if ((this.map.get(key) ?? null) !== prev) return false;
    if (next === null) this.map.delete(key);
    else this.map.set(key, next);
    return true;
  }
}

// frame is every export's input: one line of JSON, "\n", the raw body bytes. It is a
// Uint8Array that owns its whole ArrayBuffer: @extism/extism 1.0.3 stores an input's
// .buffer, ignoring byteOffset, and a small Buffer is a slice of Node's shared pool.
const frame = (head, body) => new Uint8Array(Buffer.concat([Buffer.from(`${JSON.stringify(head)}\n`), body ?? Buffer.alloc(0)]));

// unframe splits an export's output into [head, body]; it copies, since reset() frees the output.
function unframe(fn, out) {
  if (out === null) throw new Error(`${fn}: no output`);
  const b = Buffer.from(out.bytes());
  const nl = b.indexOf(10);
  if (nl < 0) throw new Error(`${fn}: output has no head line`);
  return [JSON.parse(b.subarray(0, nl).toString('utf8')), b.subarray(nl + 1)];
}

// loadExchange reads an Extism manifest (wasm[0].path, config.config, config.exchange) and
// answers call(fn, head, body) -> [head, body]: one plugin instance, calls queued, each output's
// "notify" written to the standing streams and its "log" printed.
export async function loadExchange(manifestPath, { store = new MemoryStore(), exchange = {}, namedExports = false } = {}) {
  const m = JSON.parse(await readFile(manifestPath, 'utf8'));
  const config = { ...m.config };
  const opts = { ...JSON.parse(config.exchange ?? '{}'), ...exchange };
  if (Object.keys(opts).length > 0) config.exchange = JSON.stringify(opts);
  const hostFn = (fn) => (cx, offset) => {
    try {
      return cx.store(JSON.stringify(fn(JSON.parse(cx.read(offset).text()))));
    } catch (err) {
      return cx.store(JSON.stringify({ error: String(err?.message ?? err) }));
    }
  };
  const functions = { 'extism:host/user': { state_get: hostFn((keys) => store.get(keys)), state_cas: hostFn((c) => store.cas(c)) } };
  const module = await WebAssembly.compile(await readFile(path.resolve(path.dirname(manifestPath), m.wasm[0].path)));
  const plugin = await createPlugin({ wasm: [{ module }] }, { useWasi: true, config, functions });
  const streams = new Set(); // {session, res}: the standing GET streams
  let queue = Promise.resolve();
  const raw = namedExports ? null : rawEntry((await plugin.getInstance()).exports);
  const once = async (fn, head, body) => {
    try {
      return unframe(fn, raw ? raw(fn, frame(head, body)) : await plugin.call(fn, frame(head, body)));
    } finally {
      await plugin.reset();
    }
  };
  const call = async (fn, head, body) => {
    const run = queue.then(() => once(fn, head, body));
    queue = run.catch(() => {});
    const [h, b] = await run;
    for (const l of h.log ?? []) console.error(`stategate: ${JSON.stringify(l)}`);
    for (const n of h.notify ?? []) for (const s of streams) if (n.to !== undefined ? s.session === n.to : s.session !== n.except) s.res.write(n.event);
    if (h.error) console.error(`stategate: ${fn}: ${h.error}`);
    return [h, b];
  };
  return { call, streams, store, maxBodyBytes: opts.maxBodyBytes ?? 16 << 20, close: () => plugin.close() };
}

// RAW_IDS are the exchange exports' function ids for the raw entry (abi.FuncHTTPRequest, ...).
const RAW_IDS = { http_request: 16, http_answer: 17, http_timeout: 18 };

// rawEntry answers call(fn, input) -> output (bytes(), valid until the next call) through the module's raw entry, or null
// when the module has none: stategate_alloc(len) is where to write the input,
// stategate_call(id, ptr, len) answers (outPtr << 32 | outLen) as a bigint. The memory's
// buffer is read after each call, since the module's memory may have grown.
function rawEntry(x) {
  if (typeof x.stategate_alloc !== 'function' || typeof x.stategate_call !== 'function') return null;
  return (fn, input) => {
    const ptr = x.stategate_alloc(input.length);
    if (ptr === 0) throw new Error(`${fn}: the module refused an input of ${input.length} bytes`);
    new Uint8Array(x.memory.buffer, ptr, input.length).set(input);
    const r = BigInt.asUintN(64, x.stategate_call(RAW_IDS[fn], ptr, input.length));
    const out = new Uint8Array(x.memory.buffer, Number(r >> 32n), Number(r & 0xffffffffn));
    return { bytes: () => out }; // as a PluginOutput: unframe copies it
  };
}

// readBody answers at most max bytes of the request body (the module refuses what is over its limit).
async function readBody(req, max) {
  const chunks = [];
  let n = 0;
  for await (const c of req) {
    if (n < max) chunks.push(c.subarray(0, max - n));
    n += c.length;
  }
  return Buffer.concat(chunks);
}

// write sends an export's output to the client: status and headers first, then the bytes.
function write(res, head, body) {
  if (res.destroyed) return; // the client left
  if (head.status !== undefined && !res.headersSent) res.writeHead(head.status, (head.headers ?? []).flat());
  if (body.length > 0 && !res.writableEnded) res.write(body);
  if (head.end && !res.writableEnded) res.end();
}

// target maps the module's path onto the upstream: an upstream URL with a path is one MCP
// endpoint; one without takes the request's path, and so does a path at the upstream's
// origin (d.origin: an OAuth discovery document). The query is the request's. A path at the
// origin that the URL parser would not send as it is (dot segments, `\`, a leading `//`) is
// refused: null.
function target(upstream, p, origin) {
  const u = new URL(upstream);
  const asked = new URL(p, u);
  if (origin && asked.pathname !== p.replace(/[?#].*$/s, '')) return null;
  if (origin || u.pathname === '/' || u.pathname === '') u.pathname = asked.pathname;
  u.search = asked.search;
  return u;
}

// send makes the upstream request and answers its response (IncomingMessage). Headers go as
// the module gave them, in order (a raw list: Node then adds no Host or Content-Length itself).
function send(url, d, body, signal) {
  const own = d.headers.filter(([k]) => !/^(host|content-length)$/i.test(k));
  const headers = [['Host', url.host], ...own, ...(body.length > 0 ? [['Content-Length', String(body.length)]] : [])];
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, { method: d.method, headers: headers.flat(), signal }, resolve);
    req.on('error', reject);
    req.end(body.length > 0 ? body : undefined);
  });
}

// forward runs one forwarded exchange: the upstream's answer goes through http_answer (or
// straight to the client when rewrite is false), with http_timeout when timeoutMs passes.
async function forward(ex, upstream, res, d, body) {
  const ctl = new AbortController();
  let ended = false; // the module is done with this exchange: call nothing more for it
  let piped = false; // the module has the head (pipe): the rest of the body goes as it comes, nothing more is called
  let failure;
  let chain = Promise.resolve(); // this exchange's calls, in order
  const step = (fn, head, bytes = Buffer.alloc(0)) =>
    (chain = chain
      .then(async () => {
        if (ended || piped) return;
        const [h, b] = await ex.call(fn, { exchange: d.exchange, ...head }, bytes);
        write(res, h, b);
        piped = h.pipe === true;
        if (h.abandon === false) return; // the client has its answer; the module still reads the upstream's
        if (h.end || head.error) ended = true;
        if (ended && (h.abandon || head.error === 'cancelled')) ctl.abort();
      })
      .catch((err) => {
        (ended = true), (failure ??= err), ctl.abort();
      }));
  const timer = d.rewrite && d.timeoutMs > 0 ? setTimeout(() => step('http_timeout', {}), d.timeoutMs) : null;
  res.on('close', () => {
    if (d.rewrite && !res.writableFinished && !ended) step('http_answer', { error: 'cancelled' });
  });
  let up;
  try {
    const url = target(upstream, d.path, d.origin);
    if (url === null) {
      res.writeHead(400).end(); // the request is the client's fault; the module learns it never left
      return d.rewrite && step('http_answer', { error: 'unreachable' });
    }
    up = await send(url, d, body, ctl.signal);
  } catch (err) {
    clearTimeout(timer);
    if (!d.rewrite) return res.writeHead(502).end();
    await step('http_answer', { error: NEVER_SENT.has(err.code) ? 'unreachable' : 'broken' });
    if (failure) throw failure;
    return;
  }
  const headers = pairs(up.rawHeaders).filter(([k]) => !HOP_BY_HOP.has(k.toLowerCase()));
  if (!d.rewrite) {
    res.writeHead(up.statusCode, headers.flat());
    return pipeline(up, res).catch(() => {}); // the client leaving aborts the upstream, the upstream breaking off the client
  }
  let first = { status: up.statusCode, headers };
  try {
    // One chunk at a time (the upstream waits while the module reads); on pipe the rest of
    // the body goes to the client as it reads it, and a break on either side aborts the other.
    for await (const chunk of up.iterator({ destroyOnReturn: false })) {
      await step('http_answer', { ...first, more: true }, chunk);
      first = {};
      if (piped) break;
    }
    await (piped ? pipeline(up, res) : step('http_answer', { ...first, more: false }));
  } catch {
    if (!ctl.signal.aborted) await step('http_answer', { error: 'broken' });
  } finally {
    await chain;
    clearTimeout(timer);
  }
  if (failure) throw failure;
}

// handle is the loop of calls for one client request.
async function handle(ex, upstream, req, res) {
  const body = await readBody(req, ex.maxBodyBytes + 1);
  const head = { method: req.method, path: req.url, headers: pairs(req.rawHeaders), waitedMs: 0 };
  for (;;) {
    const [d, out] = await ex.call('http_request', head, body);
    if (d.do === 'answer') return write(res, { ...d, end: true }, out);
    if (d.do === 'forward') return forward(ex, upstream, res, d, out);
    if (d.do === 'stream') {
      const s = { session: d.session, res };
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' }).flushHeaders();
      ex.streams.add(s);
      return res.on('close', () => ex.streams.delete(s));
    }
    if (d.do !== 'wait') throw new Error(`http_request: unknown decision ${JSON.stringify(d.do)}`);
    await new Promise((r) => setTimeout(r, d.afterMs));
    head.waitedMs += d.afterMs;
  }
}

function listen(server, where) {
  const i = where.lastIndexOf(':');
  return new Promise((resolve) => server.listen(Number(where.slice(i + 1)), where.slice(0, i).replace(/^\[|\]$/g, ''), () => resolve(server.address())));
}

// serve runs the gateway for exchange ex in front of upstream and answers the server.
export async function serve(ex, upstream, where = '127.0.0.1:8081') {
  const server = http.createServer((req, res) =>
    handle(ex, upstream, req, res).catch((err) => {
      console.error('stategate:', err);
      if (res.headersSent) return res.destroy(); // mid-answer: the client sees it broken off
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal gateway error"}}');
    }),
  );
  const a = await listen(server, where);
  console.error(`stategate gateway on http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}/mcp -> ${upstream}`);
  return server;
}

async function main() {
  const args = process.argv.slice(2);
  const opt = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
  const list = (name) => opt(name)?.split(',').filter(Boolean);
  const where = opt('--listen') ?? '127.0.0.1:8081';
  const loopback = /^(localhost|127\.[0-9.]+|\[::1\])$/i.test(where.slice(0, where.lastIndexOf(':'))); // the Host check's switch
  const publicUrl = opt('--public-url') ?? (/^(0\.0\.0\.0|::|\[::\])?:[0-9]+$|:0$/.test(where) ? undefined : `http://${where}`); // OAuth discovery
  if (publicUrl === undefined) console.error(`stategate: no public URL (--listen ${where} names no address to give clients; set --public-url): OAuth discovery documents and challenges pass unchanged`);
  const exchange = { loopback, publicUrl, upstream: opt('--upstream'), ...(list('--allowed-origins') && { allowedOrigins: list('--allowed-origins') }), ...(list('--allowed-hosts') && { allowedHosts: list('--allowed-hosts') }) };
  const ex = await loadExchange(opt('--manifest') ?? path.join(here, 'manifest.json'), { exchange, namedExports: args.includes('--named-exports') });
  if (opt('--upstream') !== undefined) return serve(ex, opt('--upstream'), where);
  const { selfCheck } = await import('./selfcheck.mjs'); // the demo run beside the page
  try {
    process.stdout.write(`${JSON.stringify(await selfCheck(ex, { serve, listen, readBody }), null, 2)}\n`);
  } finally {
    await ex.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err?.stack ?? String(err));
    process.exit(1);
  });
}
