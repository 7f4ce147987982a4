// gateway.mjs: a minimal MCP gateway in Node that applies the stategate Extism plugin
// (build/stategate.wasm) with @extism/extism 1.0.3, loaded from manifest.json.
//
//   node gateway.mjs                                      self-contained run: starts a tiny MCP
//                                                         upstream and the gateway on 127.0.0.1,
//                                                         drives a real exchange through them and
//                                                         prints a JSON summary
//   node gateway.mjs --upstream URL [--listen HOST:PORT]  serve the gateway in front of URL
//
// What it shows: tools/list decorated (decorate_tools), tools/call admitted or denied before the
// upstream (check_limits), results decorated (decorate_result), workflows advanced
// (transition), with the needState protocol against an in-memory store. Failure policy:
// decoration fails open, the gate fails closed (GATE_UNAVAILABLE).
//
// Notes on @extism/extism 1.0.3: the plugin's config is read only from the createPlugin
// options ({config: {config: <string>}}; a manifest's config is ignored, and "" throws);
// manifest memory and timeout limits are not enforced by this SDK, so the gateway checks the
// call duration against timeout_ms itself; call() answers a PluginOutput or null; the host
// frees nothing between calls, hence plugin.reset() after each.
import http from 'node:http';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

process.removeAllListeners('warning');
process.on('warning', (w) => {
  if (w.name === 'ExperimentalWarning' && /WASI/.test(w.message)) return;
  process.stderr.write(`${w.name}: ${w.message}\n`);
});
const { default: createPlugin } = await import('@extism/extism');

const here = path.dirname(fileURLToPath(import.meta.url));
const MAX_BODY = 1 << 20;

// loadPlugin reads an Extism manifest (canonical JSON: wasm[].path, config.config,
// memory.max_pages, timeout_ms) and answers a small caller of the plugin's exports.
export async function loadPlugin(manifestPath) {
  const m = JSON.parse(await readFile(manifestPath, 'utf8'));
  const config = m.config?.config;
  if (typeof config !== 'string' || config === '') {
    throw new Error(`${manifestPath}: config.config must hold the stategate configuration as a JSON string`);
  }
  const wasm = path.resolve(path.dirname(manifestPath), m.wasm[0].path);
  const module = await WebAssembly.compile(await readFile(wasm));
  const plugin = await createPlugin({ wasm: [{ module }] }, { useWasi: true, config: { config } });
  const timeoutMs = m.timeout_ms ?? 1000;
  return {
    // call runs one export on a JSON value and answers the parsed result; an error document,
    // no output or an overrun of timeout_ms throws.
    async call(fn, input) {
      const t0 = performance.now();
      try {
        const out = await plugin.call(fn, JSON.stringify(input));
        const ms = performance.now() - t0;
        if (ms > timeoutMs) throw new Error(`${fn} took ${ms.toFixed(1)} ms, over timeout_ms ${timeoutMs}`);
        if (out === null) throw new Error(`${fn}: no output`);
        const doc = JSON.parse(out.text());
        if (doc.error) throw new Error(`${fn}: ${doc.error.code}: ${doc.error.message}`);
        return doc;
      } finally {
        await plugin.reset();
      }
    },
    close: () => plugin.close(),
  };
}

// Gateway applies the plugin to MCP traffic bound for upstream. State lives in a Map (one
// process); a real deployment keeps it in Redis with compare-and-set, as host/ does.
export class Gateway {
  constructor(plugin, upstream) {
    this.plugin = plugin;
    this.upstream = upstream;
    this.store = new Map(); // state key -> snapshot (JSON text, stored as given)
  }

  // withState calls fn, answering the engine's needState once from the store.
  async withState(fn, input) {
    let doc = await this.plugin.call(fn, input);
    if (!doc.needState) return [doc, input.states];
    const states = {};
    for (const k of doc.needState) states[k] = this.store.has(k) ? JSON.parse(this.store.get(k)) : null;
    doc = await this.plugin.call(fn, { ...input, states });
    if (doc.needState) throw new Error(`${fn} asked for state twice`);
    return [doc, states];
  }

  async handle(req, res) {
    const body = await readBody(req);
    if (body === null) return send(res, 413, rpcError(null, -32600, `request body is over ${MAX_BODY} bytes`));
    let msg;
    try {
      msg = JSON.parse(body);
    } catch {
      return send(res, 400, rpcError(null, -32700, 'parse error: the request body is not valid JSON'));
    }
    const scope = {
      session: req.headers['mcp-session-id'] ?? '',
      principal: '',
      protocolVersion: req.headers['mcp-protocol-version'] ?? '',
    };
    if (msg.method === 'tools/call') return this.toolsCall(req, res, body, msg, scope);
    const up = await this.forward(req, body);
    if (msg.method !== 'tools/list' || up.status !== 200) return send(res, up.status, up.text, up.type);
    return send(res, 200, await rewrite(up, msg.id, async (reply) => {
      try {
        const [doc] = await this.withState('decorate_tools', { message: reply, ...scope, now: Date.now() });
        this.keep(doc.states); // tool health: new pins, quarantines, the index of known units
        return doc.message;
      } catch (err) {
        console.error(`stategate: decorate_tools failed, passing the list unchanged: ${err.message}`);
        return reply; // decoration fails open
      }
    }), up.type);
  }

  async toolsCall(req, res, body, msg, scope) {
    const tool = msg.params?.name;
    const args = msg.params?.arguments;
    let admission, states;
    try {
      [admission, states] = await this.withState('check_limits', { tool, arguments: args, ...scope, now: Date.now() });
      if (admission.probe) {
        // Tool health: this call is the one probe of an auto-disabled tool. One process,
        // one Map: the claim cannot be lost here (a shared store needs compare-and-set).
        this.keep(admission.states);
        states = { ...states, ...admission.states };
      }
    } catch (err) {
      console.error(`stategate: check_limits failed, denying ${tool}: ${err.message}`);
      return send(res, 200, { jsonrpc: '2.0', id: msg.id, result: gateUnavailable(tool) }); // the gate fails closed
    }
    if (!admission.allow) return send(res, 200, { jsonrpc: '2.0', id: msg.id, result: admission.result });
    // Tool health: every outcome is reported once (a healthy success need not be when
    // check_limits says quietOnSuccess).
    const report = async (outcome, isError) => {
      if (outcome === 'success' && admission.quietOnSuccess) outcome = undefined;
      const [t] = await this.withState('transition', { tool, arguments: args, ...scope, isError, states, outcome, probe: admission.probe, now: Date.now() });
      this.keep(t.states);
    };
    let up;
    try {
      up = await this.forward(req, body);
    } catch (err) {
      await report('unreachable', true).catch(() => {});
      return send(res, 502, rpcError(msg.id, -32603, 'the gateway could not get an answer from the MCP server'));
    }
    if (up.status !== 200) {
      if (up.status >= 500) await report('error', true).catch(() => {});
      return send(res, up.status, up.text, up.type);
    }
    return send(res, 200, await rewrite(up, msg.id, async (reply) => {
      const isError = reply.error !== undefined || reply.result?.isError !== undefined && reply.result?.isError !== false;
      const outcome = !isError ? 'success' : (reply.error === undefined && typeof reply.result === 'object' ? 'is_error' : 'error');
      try {
        await report(outcome, isError);
      } catch (err) {
        console.error(`stategate: transition failed, the workflow did not advance: ${err.message}`);
      }
      try {
        return (await this.plugin.call('decorate_result', { tool, message: reply })).message;
      } catch (err) {
        console.error(`stategate: decorate_result failed, passing the result unchanged: ${err.message}`);
        return reply;
      }
    }), up.type);
  }

  // keep stores the states the engine answered (snapshots, tool health records).
  keep(states) {
    for (const [k, v] of Object.entries(states ?? {})) this.store.set(k, JSON.stringify(v));
  }

  async forward(req, body) {
    const r = await fetch(this.upstream, {
      method: 'POST',
      headers: pick(req.headers, ['content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'mcp-method', 'mcp-name']),
      body,
    });
    return { status: r.status, type: r.headers.get('content-type') ?? 'application/json', text: await r.text() };
  }
}

// rewrite applies f to the response message answering id: the whole body for JSON, the
// matching event's data for SSE (other events pass unchanged).
async function rewrite(up, id, f) {
  if (!up.type.startsWith('text/event-stream')) return JSON.stringify(await f(JSON.parse(up.text)));
  const events = up.text.split(/\r?\n\r?\n/);
  for (let i = 0; i < events.length; i++) {
    const lines = events[i].split(/\r?\n/);
    const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
    let m;
    try {
      m = JSON.parse(data);
    } catch {
      continue;
    }
    if (m.id !== id || (m.result === undefined && m.error === undefined)) continue;
    const other = lines.filter((l) => !l.startsWith('data:'));
    events[i] = [...other, `data: ${JSON.stringify(await f(m))}`].join('\n');
  }
  return events.join('\n\n');
}

function gateUnavailable(tool) {
  return {
    content: [{ type: 'text', text: `The gateway could not check whether ${tool} is available in the current workflow state, so it did not run it. Try again shortly.` }],
    isError: true,
    _meta: { 'dev.stategate/error': { code: 'GATE_UNAVAILABLE', retryable: true, details: { tool } } },
  };
}

function rpcError(id, code, message) {
  return { jsonrpc: '2.0', id, error: { code, message } };
}

function pick(headers, names) {
  const out = {};
  for (const n of names) if (headers[n] !== undefined) out[n] = headers[n];
  return out;
}

function send(res, status, body, type = 'application/json') {
  res.writeHead(status, { 'content-type': type });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let n = 0;
    req.on('data', (c) => {
      n += c.length;
      if (n <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => resolve(n > MAX_BODY ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function listen(server, hostPort = '127.0.0.1:0') {
  const [host, port] = hostPort.split(':');
  return new Promise((resolve) => server.listen(Number(port), host, () => resolve(server.address())));
}

// A tiny MCP upstream: answers tools/list and tools/call (JSON), and records the calls it ran.
function startUpstream(calls) {
  const tools = ['cart.view', 'cart.add_item', 'cart.checkout', 'cart.pay', 'countries.list'].map((name) => ({
    name,
    description: `The ${name} tool.`,
    inputSchema: { type: 'object' },
  }));
  const server = http.createServer(async (req, res) => {
    const msg = JSON.parse(await readBody(req));
    if (msg.method === 'tools/list') return send(res, 200, { jsonrpc: '2.0', id: msg.id, result: { tools } });
    if (msg.method === 'tools/call') {
      calls.push(msg.params.name);
      return send(res, 200, { jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: `${msg.params.name} done` }] } });
    }
    return send(res, 200, rpcError(msg.id, -32601, 'method not found'));
  });
  return server;
}

async function selfCheck(plugin) {
  const calls = [];
  const upstream = startUpstream(calls);
  const ua = await listen(upstream);
  const gateway = new Gateway(plugin, `http://127.0.0.1:${ua.port}/mcp`);
  const gw = http.createServer((req, res) => gateway.handle(req, res).catch((err) => send(res, 502, rpcError(null, -32603, err.message))));
  const ga = await listen(gw);
  let id = 0;
  const rpc = async (method, params) => {
    const r = await fetch(`http://127.0.0.1:${ga.port}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': 'demo-session', 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
    });
    return r.json();
  };
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
      payText: pay.result.content[0].text,
      addItemText: add.result.content.map((c) => c.text),
      toolsAfter: names(after),
      upstreamCalls: calls,
      stored: Object.fromEntries([...gateway.store].map(([k, v]) => [k, JSON.parse(v).state])),
    };
  } finally {
    gw.close();
    upstream.close();
  }
}

async function main() {
  const args = process.argv.slice(2);
  const opt = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const plugin = await loadPlugin(opt('--manifest') ?? path.join(here, 'manifest.json'));
  const upstream = opt('--upstream');
  if (upstream === undefined) {
    try {
      process.stdout.write(JSON.stringify(await selfCheck(plugin), null, 2) + '\n');
    } finally {
      await plugin.close();
    }
    return;
  }
  const gateway = new Gateway(plugin, upstream);
  const server = http.createServer((req, res) => gateway.handle(req, res).catch((err) => send(res, 502, rpcError(null, -32603, err.message))));
  const a = await listen(server, opt('--listen') ?? '127.0.0.1:8081');
  console.error(`stategate gateway on http://${a.address}:${a.port}/mcp -> ${upstream}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err && err.stack ? err.stack : String(err));
    process.exit(1);
  });
}
