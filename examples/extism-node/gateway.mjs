// gateway.mjs: a small MCP gateway in Node that applies the stategate Extism plugin
// (build/stategate.wasm) with @extism/extism 1.0.3, loaded from manifest.json. It follows the
// host rules of abi/ABI.md ("Hosts: the rules around the exports"): read the two side by side.
//
//   node gateway.mjs         a self-contained run against a tiny built-in upstream (JSON summary)
//   node gateway.mjs --upstream URL [--listen HOST:PORT] [--allowed-origins A,B] [--allowed-hosts H,I]
//
// A request meets, in order: the Origin/Host check (DNS rebinding); admission (post: encoding,
// size, one strict JSON document that repeats no member name, the batch rule, header/body
// agreement, ids); for tools/call the gate (admit: check_limits with needState, and for a tool
// whose success moves a workflow, a lease on its state keys); the upstream; the answer
// (exchange, rewrite: the success rule, transition with compare-and-set, decoration). Every
// fault gets the policy of one table (FAULT_POLICY, as abi/faults.go).
//
// Deliberately left out (the Go gateway, host/gateway over exchange/, has them):
//   - one process: leases are a per-key async mutex and state is a Map. Several replicas need a
//     shared lease and a shared store with compare-and-set (the Go gateway: Redis), or each
//     replica admits its own racing call;
//   - one plugin instance, calls queued, kept even after a trap (a real host pools instances
//     and replaces one that traps);
//   - answers are buffered whole, with no size limit (so no response_too_large); the standing
//     GET stream passes untouched, so a list_changed for a client that takes no SSE on its
//     POST is dropped;
//   - a body that is not valid UTF-8 is refused (400, -32700); a body over the limit is
//     answered without its id; the upstream is not aborted after a timeout;
//   - gateway sessions: in front of a server that issues no Mcp-Session-Id, the sample issues
//     none either (the Go core does, exchange/session.go), so session-keyed workflows there
//     do not advance;
//   - Go-only extras: _meta durationMs, cache hints on 2026-07-28 lists, metrics and events.
//
// @extism/extism 1.0.3: the config is read only from createPlugin's options (a manifest's is
// ignored, and "" throws); memory and timeout limits are not enforced, so each call's duration
// is checked against timeout_ms here; call() answers a PluginOutput or null; the host frees
// nothing between calls, hence reset() after each.
import http from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
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
const MAX_BATCH = 100;
const BATCH_GONE = '2025-06-18'; // batches were removed in this protocol version
const ACTS_ON = new Set(['initialize', 'tools/list', 'tools/call']);
const LEASE_WAIT_MS = 5000; // a moving call waits at most this long for another's lease
const DEFAULT_TIMEOUT_MS = 30000; // for a call check_limits could not be asked about
const SENT_NOTHING = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']); // the request never left

// The exact denial texts of abi/faults.go.
export const GATE_UNAVAILABLE_TEXT = 'The gateway could not check whether this tool is available in the current workflow state, so it did not run it. Try again shortly.';
export const GATE_BUSY_TEXT = 'Another call that can change this workflow is still running (or its outcome is not known yet), so the gateway did not run this one. Try again shortly.';

// FAULT_POLICY is abi.PolicyFor: the one place the failure policy is decided.
const FAULT_POLICY = {
  decorate_plugin: 'fail_open', // decorate_tools / decorate_result failed: the answer passes unchanged
  gate_plugin: 'fail_closed', // check_limits failed for a bound tool: GATE_UNAVAILABLE
  limits_plugin: 'fail_open', // check_limits failed for an unbound tool: forwarded, default timeout
  gate_store: 'fail_closed', // state could not be read for a gated tool
  gate_busy: 'fail_closed', // another moving call held the state past LEASE_WAIT_MS
  list_store: 'fail_open', // state could not be read to hide tools: the list unfiltered
  transition: 'report', // transition or its write failed after the upstream ran
  outcome_unknown: 'hold_lease', // a moving call was sent and no readable answer came back
  upstream: 'bad_gateway', // the upstream could not be reached or broke off: 502, -32603
  upstream_body: 'fail_open', // the answer could not be read: passed through unchanged
  response_too_large: 'fail_open',
  client_gone: 'report',
  clear_session: 'report',
};

function fault(name, err, detail = '') {
  const policy = FAULT_POLICY[name];
  console.error(`stategate: fault=${name} policy=${policy}${detail && ` ${detail}`}: ${err?.message ?? err}`);
  return policy;
}

// PluginError is an export's error answer ({"error": {code, message}}).
export class PluginError extends Error {
  constructor(fn, code, message) {
    super(`${fn}: ${code}: ${message}`);
    this.code = code;
    this.detail = message;
  }
}
// Errors the engine answers because of what the client sent (200, -32602), not a fault.
const REQUEST_CAUSED = new Set(['INVALID_INPUT', 'INVALID_JSON', 'TOO_DEEP']);
class StoreError extends Error {}
class BusyError extends Error {}

// loadPlugin reads an Extism manifest (canonical JSON: wasm[].path, config.config,
// memory.max_pages, timeout_ms) and answers {call(fn, inputJSON) -> outputJSON, close()}.
// One instance is single-threaded, so calls are queued (a pool of one).
export async function loadPlugin(manifestPath) {
  const m = JSON.parse(await readFile(manifestPath, 'utf8'));
  const config = m.config?.config;
  if (!config || typeof config !== 'string') throw new Error(`${manifestPath}: config.config must hold the stategate configuration as a JSON string`);
  const wasm = path.resolve(path.dirname(manifestPath), m.wasm[0].path);
  const module = await WebAssembly.compile(await readFile(wasm));
  const plugin = await createPlugin({ wasm: [{ module }] }, { useWasi: true, config: { config } });
  const timeoutMs = m.timeout_ms ?? 1000;
  const once = async (fn, input) => {
    const t0 = performance.now();
    try {
      const out = await plugin.call(fn, input);
      const ms = performance.now() - t0;
      if (ms > timeoutMs) throw new Error(`${fn} took ${ms.toFixed(1)} ms, over timeout_ms ${timeoutMs}`);
      if (out === null) throw new Error(`${fn}: no output`);
      const text = out.text();
      const err = JSON.parse(text).error;
      if (err) throw new PluginError(fn, err.code, err.message);
      return text;
    } finally {
      await plugin.reset();
    }
  };
  let queue = Promise.resolve();
  return {
    call(fn, input) {
      const run = queue.then(() => once(fn, input));
      queue = run.catch(() => {});
      return run;
    },
    close: () => plugin.close(),
  };
}

// scanJSON reads text as exactly one JSON value (no BOM, nothing after it). It answers
// {repeats, members}: repeats says some object, anywhere, repeats a member name (compared
// unescaped: "\u0061" is "a"; JSON.parse keeps the last, other parsers the first); members
// maps each member of a top-level object to its value's [start, end) in text, so a value can
// be swapped (the id) while every other byte is kept. Invalid JSON throws a SyntaxError.
export function scanJSON(text, maxDepth = 4096) {
  let i = 0;
  let repeats = false;
  const members = new Map();
  const fail = () => {
    throw new SyntaxError(`invalid JSON at offset ${i}`);
  };
  const eat = (re) => {
    re.lastIndex = i;
    const m = re.exec(text);
    if (m) i = re.lastIndex;
    return m?.[0];
  };
  const value = (depth) => {
    const c = text[i];
    if (c !== '{' && c !== '[') return (eat(STRING) ?? eat(NUMBER) ?? eat(LITERAL)) ?? fail();
    if (depth >= maxDepth) fail();
    i++;
    eat(WS);
    const close = c === '{' ? '}' : ']';
    if (text[i] === close) return i++;
    const seen = new Set();
    for (;;) {
      let name;
      if (c === '{') {
        name = JSON.parse(eat(STRING) ?? fail());
        if (seen.has(name)) repeats = true;
        seen.add(name);
        eat(WS);
        if (text[i++] !== ':') fail();
        eat(WS);
      }
      const start = i;
      value(depth + 1);
      if (c === '{' && depth === 0) members.set(name, [start, i]);
      eat(WS);
      const sep = text[i++];
      if (sep === close) return;
      if (sep !== ',') fail();
      eat(WS);
    }
  };
  eat(WS);
  value(0);
  eat(WS);
  if (i !== text.length) fail();
  return { repeats, members };
}
const WS = /[ \t\r\n]*/y;
const STRING = /"(?:[^"\\\u0000-\u001f]+|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const LITERAL = /true|false|null/y;

// member answers the raw text of a top-level member of the JSON object text (undefined when absent).
function member(text, name) {
  const span = scanJSON(text).members.get(name);
  return span && text.slice(span[0], span[1]);
}

// withMember answers the JSON object text with member name set to raw JSON, every other byte kept.
function withMember(text, name, raw) {
  const span = scanJSON(text).members.get(name);
  if (span) return text.slice(0, span[0]) + raw + text.slice(span[1]);
  const head = text.trimEnd().slice(0, -1).trimEnd();
  return `${head}${head.endsWith('{') ? '' : ','}${JSON.stringify(name)}:${raw}}`;
}

// jsonWith encodes obj with raw JSON members appended (undefined ones skipped): client and
// upstream bytes reach the engine as they were, never rounded by JSON.parse.
function jsonWith(obj, raw) {
  let s = JSON.stringify(obj);
  for (const [k, v] of Object.entries(raw)) {
    if (v !== undefined) s = `${s.slice(0, -1)}${s.length > 2 ? ',' : ''}${JSON.stringify(k)}:${v}}`;
  }
  return s;
}

// echoSafe: servers echo these ids faithfully: an integer of at most 15 digits, or a string
// without escapes or control characters (the body is valid UTF-8 by then).
const echoSafe = (raw) => /^-?[0-9]{1,15}$/.test(raw) || /^"[^\\\u0000-\u001f]*"$/.test(raw);

let minted = 0;
// mintId answers a string id of exactly n bytes of JSON (n >= 3; unsafe ids are never shorter).
function mintId(n) {
  const digits = (++minted).toString(36).padStart(n - 2, '0').slice(-(n - 2));
  return `"${digits}"`;
}

// sameId compares ids by value: 1.0 is 1, "\u0061" is "a".
const sameId = (a, b) => (typeof a === 'number' || typeof a === 'string') && a === b;
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// isAnswer: only a message with result or error and no method answers a request.
const isAnswer = (msg, id) => isObject(msg) && !('method' in msg) && ('result' in msg || 'error' in msg) && sameId(msg.id, id);

// succeeded is ABI.md's success rule: an object result whose isError is absent or exactly
// false, no error member, in an answer that repeats no member. Anything else is a failure.
export function succeeded(msg, repeats) {
  if (repeats || 'error' in msg || !isObject(msg.result)) return false;
  return !('isError' in msg.result) || msg.result.isError === false;
}

// Leases serialise moving calls on their state keys within one process: key -> lease. A lease
// ends when released or when it lapses after its ttl. A host with several replicas needs a
// shared lease instead (the Go gateway: Redis SET NX PX), or each replica admits its own caller.
export class Leases {
  held = new Map(); // key -> {expires, released: Promise}
  async acquire(keys, ttlMs, waitMs) {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const now = Date.now();
      const busy = keys.map((k) => this.held.get(k)).filter((l) => l && l.expires > now);
      if (busy.length === 0) break;
      if (now >= deadline) return null;
      const wake = Math.min(deadline, ...busy.map((l) => l.expires)) - now;
      await Promise.race([...busy.map((l) => l.released), sleep(wake)]);
    }
    let done;
    const lease = { expires: Date.now() + ttlMs, released: new Promise((r) => (done = r)) };
    for (const k of keys) this.held.set(k, lease);
    return () => {
      for (const k of keys) if (this.held.get(k) === lease) this.held.delete(k);
      done();
    };
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms).unref());

// MemoryStore keeps each snapshot as the bytes the engine gave, written with compare-and-set.
// A real deployment keeps them in Redis or a database, as host/ does.
export class MemoryStore {
  map = new Map();
  async load(keys) {
    return new Map(keys.map((k) => [k, this.map.get(k) ?? null]));
  }
  async cas(key, prev, next) {
    if ((this.map.get(key) ?? null) !== prev) return false;
    this.map.set(key, next);
    return true;
  }
  async forget(keys) {
    for (const k of keys) this.map.delete(k);
  }
}

// statesJSON encodes loaded snapshots as the engine's "states" member (null: nothing stored).
const statesJSON = (loaded) => loaded && `{${[...loaded].map(([k, v]) => `${JSON.stringify(k)}:${v ?? 'null'}`).join(',')}}`;

// Gateway applies the plugin to MCP traffic bound for upstream.
export class Gateway {
  // create asks check_config once for the host facts: which tools are gated or move a
  // workflow, the principal header, listChanged, and the longest timeout (for leases).
  static async create(plugin, upstream, opts = {}) {
    const cfg = JSON.parse(await plugin.call('check_config', '{}'));
    if (!cfg.valid || !cfg.host) throw new Error(`invalid stategate configuration: ${JSON.stringify(cfg.errors)}`);
    return new Gateway(plugin, upstream, cfg.host, opts);
  }

  constructor(plugin, upstream, host, { allowedOrigins = [], allowedHosts = [], loopback = true, store = new MemoryStore() } = {}) {
    Object.assign(this, { plugin, upstream, host, allowedOrigins, allowedHosts, loopback, store });
    this.leaseTtlMs = host.maxTimeoutMs + 30000;
    this.leases = new Leases();
    this.knownTools = new Map(); // session -> toolNames of its last list (for decorate_result)
  }

  async engine(fn, obj, raw = {}) {
    const text = await this.plugin.call(fn, jsonWith(obj, raw));
    return [JSON.parse(text), text];
  }

  // withState calls fn, answering the engine's needState once from the store. lock (for a
  // moving call) takes the lease on the keys before they are read.
  async withState(fn, obj, raw, lock) {
    let [doc, text] = await this.engine(fn, obj, raw);
    if (!doc.needState) return { doc, text, loaded: null };
    if (lock) await lock(doc.needState);
    let loaded;
    try {
      loaded = await this.store.load(doc.needState);
    } catch (err) {
      throw new StoreError(`state could not be read: ${err.message}`);
    }
    [doc, text] = await this.engine(fn, obj, { ...raw, states: statesJSON(loaded) });
    if (doc.needState) throw new Error(`${fn} asked for state twice`);
    return { doc, text, loaded };
  }

  async handle(req, res) {
    const refused = rebinding(this, req.headers.origin, req.headers.host);
    if (refused) return send(res, 403, `Forbidden: ${refused}`, 'text/plain');
    const rep = repeatedHeader(req, this.host.principalHeader);
    if (rep) return reply(res, 400, null, -32600, `invalid request: the ${rep.name} header is sent ${rep.n} times; the gateway and the server could read different values: send it once`);
    if (req.method === 'POST') return this.post(req, res);
    const r = await this.pass(req, res, req.method === 'GET' || req.method === 'HEAD' ? undefined : await readBody(req, MAX_BODY));
    if (req.method === 'DELETE' && r?.ok) await this.endSession(this.scope(req)); // the session is over
  }

  // pass forwards a request the gateway does not act on and streams the answer back untouched.
  async pass(req, res, body) {
    try {
      const r = await this.fetch(req, body);
      res.writeHead(r.status, pick(r.headers, ['content-type', 'mcp-session-id']));
      if (r.body) Readable.fromWeb(r.body).pipe(res);
      else res.end();
      return r;
    } catch (err) {
      fault('upstream', err, `method=${req.method}`);
      reply(res, 502, null, -32603, 'the gateway could not get an answer from the MCP server');
    }
  }

  scope(req) {
    const p = this.host.principalHeader;
    return {
      session: req.headers['mcp-session-id'] ?? '',
      principal: (p && req.headers[p]) || '',
      protocolVersion: req.headers['mcp-protocol-version'] ?? '',
    };
  }

  // post admits one POST (ABI.md's admission table, in its order) and answers it.
  async post(req, res) {
    const ce = req.headers['content-encoding'];
    if (ce && ce.toLowerCase() !== 'identity') return reply(res, 415, null, -32600, `compressed request bodies (${ce}) are not accepted by the gateway`);
    const cs = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(req.headers['content-type'] ?? '')?.[1];
    if (cs && !/^utf-?8$/i.test(cs)) return reply(res, 415, null, -32600, `request charset ${cs} is not accepted; send UTF-8`);
    const buf = await readBody(req, MAX_BODY);
    if (buf === null) return reply(res, 413, null, -32600, `request body over the gateway's limit of ${MAX_BODY} bytes`);
    let text, scan;
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(buf);
      if (!/^[ \t\r\n]*[[{]/.test(text)) throw new SyntaxError('not an object or array');
      scan = scanJSON(text);
    } catch {
      return reply(res, 400, null, -32700, 'parse error: the body is not one JSON-RPC message or batch');
    }
    if (scan.repeats) return reply(res, 400, null, -32600, 'request repeats a member name in an object; the gateway and the server could read different values');
    const msg = JSON.parse(text);
    const variant = caseVariant(msg) ?? (Array.isArray(msg) ? msg.map(caseVariant).find((v) => v) : undefined);
    if (variant) return reply(res, 400, null, -32600, variant);
    const scope = this.scope(req);
    if (Array.isArray(msg)) {
      const why = batchRefusal(msg, scope.protocolVersion);
      return why ? reply(res, 400, null, -32600, why) : this.pass(req, res, buf);
    }
    const span = scan.members.get('id');
    const rawId = typeof msg.id === 'string' || typeof msg.id === 'number' ? text.slice(span[0], span[1]) : null;
    const method = typeof msg.method === 'string' ? msg.method : '';
    const params = isObject(msg.params) ? msg.params : {};
    const meta = isObject(params._meta) ? params._meta['io.modelcontextprotocol/protocolVersion'] : undefined;
    const mismatch = (header, a, what, b) => reply(res, 400, rawId, -32020, `${header} header ${JSON.stringify(a)} does not match the body's ${what} ${JSON.stringify(b)}`);
    if (scope.protocolVersion === '') scope.protocolVersion = typeof meta === 'string' ? meta : '';
    else if (meta !== undefined && meta !== scope.protocolVersion) return mismatch('MCP-Protocol-Version', scope.protocolVersion, '_meta protocolVersion', meta);
    const hm = req.headers['mcp-method'];
    if (hm && hm !== method) return mismatch('Mcp-Method', hm, 'method', method);
    const hn = req.headers['mcp-name'];
    const name = typeof params.name === 'string' ? params.name : '';
    if (hn && (method === 'tools/call' || method === 'prompts/get') && hn !== name) return mismatch('Mcp-Name', hn, 'name', name);
    if (!ACTS_ON.has(method)) return this.pass(req, res, buf); // notifications, answers, other methods
    if (rawId === null) return reply(res, 400, null, -32600, `invalid request: ${method} needs an id (a string or a number)`);

    // The upstream gets an id it echoes faithfully; the client gets its own bytes back.
    const upId = echoSafe(rawId) ? rawId : mintId(Buffer.byteLength(rawId));
    const ex = { req, scope, method, rawId, upId: JSON.parse(upId), body: upId === rawId ? text : text.slice(0, span[0]) + upId + text.slice(span[1]) };
    if (method !== 'tools/call') return this.forward(res, ex, DEFAULT_TIMEOUT_MS);
    const ps = scan.members.get('params');
    ex.rawArgs = isObject(msg.params) ? member(text.slice(ps[0], ps[1]), 'arguments') : undefined;
    const admitted = await this.admit(ex, params.name);
    if (admitted.error) return reply(res, 200, rawId, -32602, admitted.error);
    if (admitted.result) return send(res, 200, answer(rawId, { result: admitted.result }));
    return this.forward(res, ex, admitted.timeoutMs, admitted.onTimeout);
  }

  // admit runs check_limits for a tools/call; a moving call takes its lease here. It answers
  // {error} (-32602), {result} (a denial to send), or {timeoutMs, onTimeout} (forward).
  async admit(ex, tool) {
    if (typeof tool !== 'string' || tool === '') return { error: 'invalid params: params.name must be a non-empty string' };
    const facts = Object.hasOwn(this.host.tools, tool) ? this.host.tools[tool] : undefined; // none: neither gated nor moving
    Object.assign(ex, { tool, gated: Boolean(facts?.gated), moves: Boolean(facts?.moves) });
    const lock = ex.moves
      ? async (keys) => {
          ex.release = await this.leases.acquire(keys, this.leaseTtlMs, LEASE_WAIT_MS);
          if (!ex.release) throw new BusyError(`state keys ${keys.join(', ')} leased by another call`);
        }
      : null;
    try {
      const { doc, loaded } = await this.withState('check_limits', { tool, ...ex.scope }, { arguments: ex.rawArgs }, lock);
      ex.loaded = loaded;
      if (doc.allow) return { timeoutMs: doc.timeoutMs, onTimeout: doc.onTimeout };
      this.settle(ex, true);
      return { result: doc.result };
    } catch (err) {
      this.settle(ex, true);
      if (err instanceof PluginError && REQUEST_CAUSED.has(err.code)) return { error: `invalid params: ${err.detail}` };
      let f = 'limits_plugin';
      if (err instanceof BusyError) f = 'gate_busy';
      else if (ex.gated) f = err instanceof StoreError ? 'gate_store' : 'gate_plugin';
      if (fault(f, err, `tool=${tool}`) !== 'fail_closed') {
        ex.moves = false; // forwarded ungated: nothing to move
        return { timeoutMs: DEFAULT_TIMEOUT_MS };
      }
      return { result: gateUnavailable(f === 'gate_busy' ? GATE_BUSY_TEXT : GATE_UNAVAILABLE_TEXT, tool) };
    }
  }

  // settle ends a moving call's lease: released when its outcome is known (done), kept until
  // it lapses when the upstream may have acted and no readable answer came back.
  settle(ex, done) {
    if (!ex.release) return;
    if (!done) fault('outcome_unknown', 'no readable answer', `tool=${ex.tool} lease=${this.leaseTtlMs}ms`);
    else ex.release();
    ex.release = null;
  }

  // forward sends an admitted request upstream and answers the client: the upstream's answer
  // rewritten, or onTimeout when it takes longer than timeoutMs. The call itself runs to
  // completion either way, so its workflow records what the upstream did.
  async forward(res, ex, timeoutMs, onTimeout) {
    const done = this.exchange(ex);
    done.catch((err) => console.error(`stategate: ${err.stack ?? err}`)); // after a timeout, nobody awaits it
    let timer;
    const late = new Promise((r) => (timer = setTimeout(r, timeoutMs ?? DEFAULT_TIMEOUT_MS, 'late')));
    let out = await Promise.race([done, late]);
    clearTimeout(timer);
    if (out === 'late') {
      if (onTimeout) return send(res, 200, answer(ex.rawId, { result: onTimeout }));
      out = await done;
    }
    res.writeHead(out.status, out.headers);
    res.end(out.body);
  }

  // exchange runs one forwarded request to its end and answers {status, headers, body}.
  async exchange(ex) {
    let r, body;
    try {
      r = await this.fetch(ex.req, ex.body);
      body = await r.text();
    } catch (err) {
      this.settle(ex, r === undefined && SENT_NOTHING.has(err.cause?.code));
      fault('upstream', err, `method=${ex.method}`);
      return { status: 502, headers: { 'content-type': 'application/json' }, body: answer(ex.rawId, { error: { code: -32603, message: 'the gateway could not get an answer from the MCP server' } }) };
    }
    const headers = pick(r.headers, ['content-type', 'mcp-session-id']);
    const type = (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (r.status === 404 && ex.scope.session) await this.endSession(ex.scope); // the upstream forgot the session
    if (!r.ok) {
      this.settle(ex, true); // the upstream refused the request: nothing ran
      return { status: r.status, headers, body };
    }
    let out = null;
    if (type === 'application/json') out = await this.rewrite(ex, body, true);
    else if (type === 'text/event-stream') {
      const events = sseEvents(body);
      for (let i = 0; i < events.length && out === null; i++) {
        const m = await this.rewrite(ex, eventData(events[i]), false);
        if (m === null) continue;
        events[i] = rewriteEvent(events[i], m.message);
        if (m.listChanged) events.splice(i, 0, sseEvent(LIST_CHANGED));
        out = { body: events.join('') };
      }
    }
    if (out === null) {
      if (r.status !== 202) fault('upstream_body', `no answer to request ${ex.rawId} in a ${type || 'typeless'} body`, `method=${ex.method}`);
      this.settle(ex, false);
      return { status: r.status, headers, body };
    }
    if (out.body !== undefined) return { status: r.status, headers, body: out.body };
    if (out.listChanged && /text\/event-stream/i.test(ex.req.headers.accept ?? '')) {
      return { status: 200, headers: { ...headers, 'content-type': 'text/event-stream' }, body: sseEvent(LIST_CHANGED) + sseEvent(out.message) };
    }
    return { status: r.status, headers, body: out.message };
  }

  // rewrite turns the upstream's answer (a JSON text) into the client's, or answers null when
  // text is not the answer to this request (a JSON body that is not: upstream_body).
  async rewrite(ex, text, whole) {
    let scan, msg;
    try {
      scan = scanJSON(text);
      msg = JSON.parse(text);
    } catch {
      return null;
    }
    if (!isAnswer(msg, ex.upId)) return null;
    if (whole) text = text.trim();
    text = withMember(text, 'id', ex.rawId);
    let listChanged = false;
    if (ex.method === 'initialize' && this.host.listChanged) text = declareListChanged(text);
    if (ex.method === 'tools/list') text = await this.decorateTools(ex.scope, text);
    if (ex.method === 'tools/call') {
      if (ex.moves) listChanged = await this.transition(ex, succeeded(msg, scan.repeats), text);
      this.settle(ex, true); // the transition is stored: the next moving call may go
      text = await this.decorateResult(ex, text);
    }
    return { message: text, listChanged };
  }

  // transition moves the call's workflows by its outcome and stores the snapshots with
  // compare-and-set. Under the lease no other call in this process writes these keys; a
  // multi-replica host re-reads a key that lost a race and calls transition again.
  // answer is the upstream's answer: the result guards of the workflows read its
  // structuredContent (passed as raw JSON, as the arguments are).
  async transition(ex, success, answer) {
    try {
      const res = success && answer ? member(answer, 'result') : undefined;
      const result = res ? member(res, 'structuredContent') : undefined;
      const { doc, text, loaded } = await this.withState('transition', { tool: ex.tool, ...ex.scope, isError: !success }, { arguments: ex.rawArgs, result, states: statesJSON(ex.loaded) });
      const states = member(text, 'states');
      const prev = loaded ?? ex.loaded;
      for (const key of Object.keys(doc.states)) {
        if (!(await this.store.cas(key, prev?.get(key) ?? null, member(states, key)))) throw new Error(`compare-and-set conflict on ${key}`);
      }
      return doc.visibleChanged === true;
    } catch (err) {
      fault('transition', err, `tool=${ex.tool}`);
      return false;
    }
  }

  async decorateTools(scope, text) {
    try {
      const { doc, text: out } = await this.withState('decorate_tools', scope, { message: text });
      if (scope.session) this.knownTools.set(scope.session, doc.toolNames);
      return member(out, 'message');
    } catch (err) {
      fault(err instanceof StoreError ? 'list_store' : 'decorate_plugin', err, 'method=tools/list');
      return text;
    }
  }

  async decorateResult(ex, text) {
    try {
      const known = this.knownTools.get(ex.scope.session);
      const [, out] = await this.engine('decorate_result', { tool: ex.tool, ...(known && { knownTools: known }) }, { message: text });
      return member(out, 'message');
    } catch (err) {
      fault('decorate_plugin', err, `tool=${ex.tool}`);
      return text;
    }
  }

  // endSession frees a session's state: the engine names its session-keyed keys (the keys a
  // decorate_tools of an empty list asks for).
  async endSession(scope) {
    this.knownTools.delete(scope.session);
    try {
      const [doc] = await this.engine('decorate_tools', { ...scope, message: { jsonrpc: '2.0', id: 0, result: { tools: [] } } });
      if (doc.needState) await this.store.forget(doc.needState);
    } catch (err) {
      fault('clear_session', err, `session=${scope.session}`);
    }
  }

  fetch(req, body) {
    const names = ['content-type', 'accept', 'authorization', 'last-event-id', 'mcp-session-id', 'mcp-protocol-version', 'mcp-method', 'mcp-name'];
    if (this.host.principalHeader) names.push(this.host.principalHeader);
    const headers = { ...pick(new Headers(req.headers), names), 'accept-encoding': 'identity' };
    return fetch(this.upstream, { method: req.method, headers, body });
  }
}

// batchRefusal applies the batch rule: none from 2025-06-18 on, at most MAX_BATCH messages,
// all objects, none of a method the gateway acts on (one request must not fan out past the gate).
// caseVariant names a member that differs from one the gateway reads only in case ("metHod",
// "NAME"): servers that decode into structs (Go's encoding/json) match names
// case-insensitively, so the request could pass as one method and run as another.
// (toLowerCase approximates Go's Unicode case folding: enough for these ASCII names.)
function caseVariant(m) {
  const check = (obj, names) => {
    for (const k of Object.keys(obj)) {
      const n = names.find((n) => n !== k && n === k.toLowerCase().replace(/\u017f/g, 's').replace(/\u212a/g, 'k'));
      if (n) return `request member ${JSON.stringify(k)} differs from ${JSON.stringify(n)} only in case; servers that match names case-insensitively could read it as ${JSON.stringify(n)}`;
    }
    return undefined;
  };
  if (!isObject(m)) return undefined;
  return check(m, ['jsonrpc', 'id', 'method', 'params']) ?? (isObject(m.params) ? check(m.params, ['name', 'arguments', '_meta']) : undefined);
}

function batchRefusal(batch, version) {
  if (version >= BATCH_GONE) return `JSON-RPC batches are not part of protocol version ${version}`;
  if (batch.length === 0) return 'empty batch';
  if (batch.length > MAX_BATCH) return `a batch holds at most ${MAX_BATCH} messages`;
  for (const m of batch) {
    if (!isObject(m)) return 'a batch element must be a JSON-RPC message object';
    if (ACTS_ON.has(m.method)) return `batches holding ${m.method} are not accepted by the gateway; send it as a request of its own`;
  }
  return '';
}

// rebinding answers why a request is refused against DNS rebinding (exchange/origin.go), or ''.
// An Origin must be listed, or, with no list, on a loopback host; on a loopback listener (or
// with --allowed-hosts) the Host must be listed or a loopback name, with any port.
function rebinding({ allowedOrigins, allowedHosts, loopback }, origin, host = '') {
  const listed = allowedOrigins.some((o) => o === '*' || o.toLowerCase() === origin?.toLowerCase());
  if (origin !== undefined && !listed && (allowedOrigins.length > 0 || !loopbackOrigin(origin))) return `origin ${origin} is not allowed (see --allowed-origins)`;
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:[0-9]*$/, '');
  if (!(loopback || allowedHosts.length > 0) || isLoopbackName(name) || allowedHosts.some((h) => h.toLowerCase() === name.toLowerCase())) return '';
  return `host ${host} is not allowed (see --allowed-hosts)`;
}

function loopbackOrigin(origin) {
  try {
    const u = new URL(origin);
    return (u.protocol === 'http:' || u.protocol === 'https:') && isLoopbackName(u.hostname.replace(/^\[|\]$/g, ''));
  } catch {
    return false;
  }
}

function isLoopbackName(name) {
  if (name.toLowerCase() === 'localhost') return true;
  if (net.isIPv4(name)) return name.split('.')[0] === '127';
  if (!net.isIPv6(name)) return false;
  const v6 = new URL(`http://[${name}]/`).hostname; // canonical form
  return v6 === '[::1]' || /^\[::ffff:7f[0-9a-f]{2}:/.test(v6);
}

// declareListChanged sets result.capabilities.tools.listChanged in an initialize answer (a
// missing or non-object level becomes an object), every other byte kept.
function declareListChanged(text) {
  const set = (obj, [name, ...rest]) => {
    if (rest.length === 0) return withMember(obj, name, 'true');
    const v = member(obj, name);
    return withMember(obj, name, set(v?.startsWith('{') ? v : '{}', rest));
  };
  return member(text, 'result')?.startsWith('{') ? set(text, ['result', 'capabilities', 'tools', 'listChanged']) : text;
}

// answer encodes a JSON-RPC response carrying the client's id as its own bytes.
const answer = (rawId, body) => jsonWith({ jsonrpc: '2.0' }, { id: rawId ?? 'null', ...Object.fromEntries(Object.entries(body).map(([k, v]) => [k, JSON.stringify(v)])) });

// IDENTITY_HEADERS name who sends a request or what it is (exchange/repeated.go): a request
// that sends one of them, or the principal header, more than once is refused on every method,
// since the gateway and the server could read different values. Node joins repeated unknown
// headers with ", " in req.headers and keeps only the first Authorization, so the field lines
// are counted in req.headersDistinct.
const IDENTITY_HEADERS = ['Mcp-Session-Id', 'MCP-Protocol-Version', 'Mcp-Method', 'Mcp-Name', 'Authorization'];

function repeatedHeader(req, principal) {
  for (const name of principal ? [...IDENTITY_HEADERS, principal] : IDENTITY_HEADERS) {
    const n = req.headersDistinct[name.toLowerCase()]?.length ?? 0;
    if (n > 1) return { name, n };
  }
  return null;
}

const reply = (res, status, rawId, code, message) => send(res, status, answer(rawId, { error: { code, message } }));

// gateUnavailable is the result of a fail-closed denial (retryable; text from abi/faults.go).
function gateUnavailable(text, tool) {
  return { content: [{ type: 'text', text }], isError: true, _meta: { 'dev.stategate/error': { code: 'GATE_UNAVAILABLE', retryable: true, details: { tool } } } };
}

const LIST_CHANGED = '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}';

// sseEvents splits an event stream into events (each with the blank line that ends it); lines
// end with CRLF, LF or CR. Events the gateway does not rewrite pass byte for byte.
function sseEvents(text) {
  const parts = text.split(/(\r\n|\r|\n)/);
  const events = [];
  let cur = '';
  for (let i = 0; i < parts.length; i += 2) {
    cur += parts[i] + (parts[i + 1] ?? '');
    if (parts[i] === '' && parts[i + 1] !== undefined) {
      events.push(cur);
      cur = '';
    }
  }
  if (cur !== '') events.push(cur);
  return events;
}

// eventData is an event's data lines joined with "\n" (one space after "data:" removed).
function eventData(event) {
  const data = event.split(/\r\n|\r|\n/).filter((l) => l === 'data' || l.startsWith('data:'));
  return data.map((l) => l.slice(5).replace(/^ /, '')).join('\n');
}

const dataLines = (data) => data.split(/\r?\n/).map((l) => `data: ${l}\n`).join('');
const sseEvent = (data) => `event: message\n${dataLines(data)}\n`;

// rewriteEvent keeps an event's other fields (event:, id:, ...) and replaces its data.
function rewriteEvent(event, data) {
  const kept = event.split(/\r\n|\r|\n/).filter((l) => l !== '' && l !== 'data' && !l.startsWith('data:'));
  return `${kept.map((l) => `${l}\n`).join('')}${dataLines(data)}\n`;
}

function pick(headers, names) {
  const out = {};
  for (const n of names) if (headers.get(n) !== null) out[n] = headers.get(n);
  return out;
}

function send(res, status, body, type = 'application/json') {
  res.writeHead(status, { 'content-type': type });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

// readBody answers the body as a Buffer, or null when it is over max bytes.
function readBody(req, max) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let n = 0;
    req.on('data', (c) => {
      n += c.length;
      if (n <= max) chunks.push(c);
    });
    req.on('end', () => resolve(n > max ? null : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function listen(server, hostPort = '127.0.0.1:0') {
  const i = hostPort.lastIndexOf(':');
  return new Promise((resolve) => server.listen(Number(hostPort.slice(i + 1)), hostPort.slice(0, i), () => resolve(server.address())));
}

// serve runs a gateway for plugin in front of upstream and answers the listening server.
export async function serve(plugin, upstream, { listen: where = '127.0.0.1:8081', ...opts } = {}) {
  const host = where.slice(0, where.lastIndexOf(':'));
  const gateway = await Gateway.create(plugin, upstream, { loopback: isLoopbackName(host.replace(/^\[|\]$/g, '')), ...opts });
  const server = http.createServer((req, res) =>
    gateway.handle(req, res).catch((err) => {
      console.error(`stategate: ${err.stack ?? err}`);
      if (!res.headersSent) send(res, 500, answer(null, { error: { code: -32603, message: 'internal gateway error' } }));
    }),
  );
  const a = await listen(server, where);
  console.error(`stategate gateway on http://${a.address}:${a.port}/mcp -> ${upstream}`);
  return { server, gateway };
}

// selfCheck drives a real exchange through the gateway, in front of a tiny MCP upstream that
// answers tools/list and tools/call and records the calls it ran.
async function selfCheck(plugin) {
  const calls = [];
  const tools = ['cart.view', 'cart.add_item', 'cart.checkout', 'cart.pay', 'countries.list'].map((name) => ({ name, description: `The ${name} tool.`, inputSchema: { type: 'object' } }));
  const upstream = http.createServer(async (req, res) => {
    const msg = JSON.parse(await readBody(req, MAX_BODY));
    if (msg.method === 'tools/call') calls.push(msg.params.name);
    send(res, 200, { jsonrpc: '2.0', id: msg.id, result: msg.method === 'tools/list' ? { tools } : { content: [{ type: 'text', text: `${msg.params?.name} done` }] } });
  });
  const { server, gateway } = await serve(plugin, `http://127.0.0.1:${(await listen(upstream)).port}/mcp`, { listen: '127.0.0.1:0' });
  let id = 0;
  const rpc = async (method, params) => {
    const headers = { 'content-type': 'application/json', accept: 'application/json', 'mcp-session-id': 'demo-session', 'mcp-protocol-version': '2025-06-18' };
    const r = await fetch(`http://127.0.0.1:${server.address().port}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }) });
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
      stored: Object.fromEntries([...gateway.store.map].map(([k, v]) => [k, JSON.parse(v).state])),
    };
  } finally {
    server.close();
    upstream.close();
  }
}

async function main() {
  const args = process.argv.slice(2);
  const opt = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const list = (name) => (opt(name) ?? '').split(',').filter(Boolean);
  const plugin = await loadPlugin(opt('--manifest') ?? path.join(here, 'manifest.json'));
  const upstream = opt('--upstream');
  if (upstream !== undefined) return serve(plugin, upstream, { listen: opt('--listen'), allowedOrigins: list('--allowed-origins'), allowedHosts: list('--allowed-hosts') });
  try {
    process.stdout.write(JSON.stringify(await selfCheck(plugin), null, 2) + '\n');
  } finally {
    await plugin.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err && err.stack ? err.stack : String(err));
    process.exit(1);
  });
}
