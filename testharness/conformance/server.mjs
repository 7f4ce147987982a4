// A reference MCP server for the official conformance suite's server scenarios
// (@modelcontextprotocol/conformance `server`), written for stategate's tests on the
// official TypeScript SDK (@modelcontextprotocol/sdk).
//
// The suite's own "everything" server lives in its source repository and is not published
// to npm, so this file implements what the scenarios call: the test_* tools, the test://
// resources and the test_* prompts, logging, completion, SSE priming and resumption
// (SEP-1699) and the SDK's localhost DNS-rebinding protection.
//
//   node server.mjs [--port N]     (0 or absent: a free port)
//
// Prints one line `listening http://127.0.0.1:PORT/mcp` on stdout once it accepts requests.
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  McpError,
  ErrorCode,
} from '@modelcontextprotocol/sdk/types.js';

// A 1x1 PNG and a minimal WAV, base64.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ type: 'text', text: t });
const noArgs = { type: 'object', properties: {} };

// ---- tools ----------------------------------------------------------------------------

const tools = [
  { name: 'test_simple_text', description: 'Answers one text block.', inputSchema: noArgs,
    run: async () => ({ content: [text('This is a simple text response for testing.')] }) },
  { name: 'test_image_content', description: 'Answers one image block.', inputSchema: noArgs,
    run: async () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }) },
  { name: 'test_audio_content', description: 'Answers one audio block.', inputSchema: noArgs,
    run: async () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }) },
  { name: 'test_embedded_resource', description: 'Answers one embedded resource.', inputSchema: noArgs,
    run: async () => ({ content: [{ type: 'resource', resource: {
      uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] }) },
  { name: 'test_multiple_content_types', description: 'Answers text, image and resource blocks.', inputSchema: noArgs,
    run: async () => ({ content: [
      text('Multiple content types test:'),
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json',
        text: JSON.stringify({ test: 'data', value: 123 }) } },
    ] }) },
  { name: 'test_tool_with_logging', description: 'Sends three log notifications, then answers.', inputSchema: noArgs,
    run: async (_args, extra) => {
      for (const [i, msg] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
        if (i > 0) await sleep(50);
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: msg } });
      }
      return { content: [text('Tool with logging executed successfully')] };
    } },
  { name: 'test_tool_with_progress', description: 'Sends progress 0, 50, 100, then answers.', inputSchema: noArgs,
    run: async (_args, extra) => {
      const progressToken = extra._meta?.progressToken ?? 0;
      for (const [i, progress] of [0, 50, 100].entries()) {
        if (i > 0) await sleep(50);
        await extra.sendNotification({ method: 'notifications/progress',
          params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` } });
      }
      return { content: [text(String(progressToken))] };
    } },
  { name: 'test_error_handling', description: 'Always answers an error result.', inputSchema: noArgs,
    run: async () => ({ isError: true, content: [text('This tool intentionally returns an error for testing')] }) },
  { name: 'test_reconnection', description: 'Closes its SSE stream mid-call; the result follows on resumption (SEP-1699).',
    inputSchema: noArgs,
    run: async (_args, extra) => {
      extra.closeSSEStream?.();
      await sleep(100);
      return { content: [text('Reconnection test completed successfully.')] };
    } },
  { name: 'test_sampling', description: 'Asks the client for a completion (sampling/createMessage).',
    inputSchema: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] },
    run: async (args, extra) => {
      const res = await extra.sendRequest({ method: 'sampling/createMessage', params: {
        messages: [{ role: 'user', content: text(String(args.prompt ?? '')) }], maxTokens: 100 } }, CreateMessageResultSchema);
      return { content: [text(`LLM response: ${res.content?.text ?? 'No response'}`)] };
    } },
  { name: 'test_elicitation', description: 'Asks the client for input (elicitation/create).',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
    run: async (args, extra) => elicit(extra, String(args.message ?? ''), {
      type: 'object', properties: { response: { type: 'string', description: "User's response" } }, required: ['response'] }) },
  { name: 'test_elicitation_sep1034_defaults', description: 'Elicitation with a default for every primitive type (SEP-1034).',
    inputSchema: noArgs,
    run: async (_args, extra) => elicit(extra, 'Please review the fields (defaults provided)', {
      type: 'object', required: [], properties: {
        name: { type: 'string', description: 'User name', default: 'John Doe' },
        age: { type: 'integer', description: 'User age', default: 30 },
        score: { type: 'number', description: 'User score', default: 95.5 },
        status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', description: 'Verification status', default: true },
      } }) },
  { name: 'test_elicitation_sep1330_enums', description: 'Elicitation with every enum schema form (SEP-1330).',
    inputSchema: noArgs,
    run: async (_args, extra) => elicit(extra, 'Please pick from the enum fields', {
      type: 'object', required: [], properties: {
        untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
        titledSingle: { type: 'string', oneOf: [
          { const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' },
          { const: 'value3', title: 'Third Option' }] },
        legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
        untitledMulti: { type: 'array', minItems: 1, maxItems: 3,
          items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
        titledMulti: { type: 'array', minItems: 1, maxItems: 3, items: { anyOf: [
          { const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' },
          { const: 'value3', title: 'Third Choice' }] } },
      } }) },
  { name: 'json_schema_2020_12_tool', description: 'Declares a JSON Schema 2020-12 input schema (SEP-1613).',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
      properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
      additionalProperties: false,
    },
    run: async (args) => ({ content: [text(`called with ${JSON.stringify(args ?? {})}`)] }) },
];

async function elicit(extra, message, requestedSchema) {
  const res = await extra.sendRequest({ method: 'elicitation/create',
    params: { mode: 'form', message, requestedSchema } }, ElicitResultSchema);
  return { content: [text(`Elicitation completed: action=${res.action}, content=${JSON.stringify(res.content ?? {})}`)] };
}

// ---- resources and prompts ---------------------------------------------------------------

const resources = [
  { uri: 'test://static-text', name: 'static-text', title: 'Static Text Resource', mimeType: 'text/plain',
    contents: { text: 'This is the content of the static text resource.' } },
  { uri: 'test://static-binary', name: 'static-binary', title: 'Static Binary Resource', mimeType: 'image/png',
    contents: { blob: PNG } },
  { uri: 'test://watched-resource', name: 'watched-resource', title: 'Watched Resource', mimeType: 'text/plain',
    contents: { text: 'Watched resource content' } },
];
const template = { uriTemplate: 'test://template/{id}/data', name: 'template', title: 'Resource Template',
  mimeType: 'application/json' };
const templateRe = /^test:\/\/template\/([^/]+)\/data$/;

const prompts = [
  { name: 'test_simple_prompt', title: 'Simple Test Prompt', description: 'A prompt without arguments', arguments: [],
    get: () => [{ role: 'user', content: text('This is a simple prompt for testing.') }] },
  { name: 'test_prompt_with_arguments', title: 'Prompt With Arguments', description: 'A prompt with two required arguments',
    arguments: [{ name: 'arg1', description: 'First argument', required: true },
      { name: 'arg2', description: 'Second argument', required: true }],
    get: (a) => [{ role: 'user', content: text(`Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'`) }] },
  { name: 'test_prompt_with_embedded_resource', title: 'Prompt With Embedded Resource', description: 'A prompt embedding a resource',
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
    get: (a) => [
      { role: 'user', content: { type: 'resource', resource: { uri: a.resourceUri, mimeType: 'text/plain',
        text: 'Embedded resource content for testing.' } } },
      { role: 'user', content: text('Please process the embedded resource above.') }] },
  { name: 'test_prompt_with_image', title: 'Prompt With Image', description: 'A prompt with an image', arguments: [],
    get: () => [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: text('Please analyze the image above.') }] },
];

// ---- one MCP server per session ---------------------------------------------------------

function newServer() {
  const server = new Server({ name: 'stategate-conformance-reference', version: '1.0.0' }, {
    capabilities: {
      tools: { listChanged: true },
      resources: { subscribe: true, listChanged: true },
      prompts: { listChanged: true },
      logging: {},
      completions: {},
    },
  });
  const log = (data) => server.notification({ method: 'notifications/message', params: { level: 'info', data } }).catch(() => {});

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const tool = tools.find((t) => t.name === req.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${req.params.name}`);
    return tool.run(req.params.arguments ?? {}, extra);
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: resources.map(({ uri, name, title, mimeType }) => ({ uri, name, title, mimeType })),
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: [template] }));
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
    const uri = req.params.uri;
    const r = resources.find((x) => x.uri === uri);
    if (r) return { contents: [{ uri, mimeType: r.mimeType, ...r.contents }] };
    const m = templateRe.exec(uri);
    if (m) {
      return { contents: [{ uri, mimeType: 'application/json',
        text: JSON.stringify({ id: m[1], templateTest: true, data: `Data for ID: ${m[1]}` }) }] };
    }
    throw new McpError(-32002, `Resource not found: ${uri}`);
  });
  server.setRequestHandler(SubscribeRequestSchema, async (req) => { log(`subscribed ${req.params.uri}`); return {}; });
  server.setRequestHandler(UnsubscribeRequestSchema, async (req) => { log(`unsubscribed ${req.params.uri}`); return {}; });

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: prompts.map(({ name, title, description, arguments: args }) => ({ name, title, description, arguments: args })),
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (req) => {
    const p = prompts.find((x) => x.name === req.params.name);
    if (!p) throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${req.params.name}`);
    return { messages: p.get(req.params.arguments ?? {}) };
  });

  server.setRequestHandler(SetLevelRequestSchema, async (req) => { log(`log level ${req.params.level}`); return {}; });
  server.setRequestHandler(CompleteRequestSchema, async () => ({ completion: { values: [], total: 0, hasMore: false } }));
  return server;
}

// An in-memory event store, so a client can resume a closed SSE stream with Last-Event-ID.
function newEventStore() {
  const events = []; // {id, streamId, message}, in order
  let seq = 0;
  return {
    async storeEvent(streamId, message) {
      const id = `${streamId}_${String(++seq).padStart(8, '0')}`;
      events.push({ id, streamId, message });
      return id;
    },
    async getStreamIdForEventId(eventId) {
      return events.find((e) => e.id === eventId)?.streamId;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const at = events.findIndex((e) => e.id === lastEventId);
      if (at < 0) throw new Error(`unknown event id ${lastEventId}`);
      const streamId = events[at].streamId;
      for (const e of events.slice(at + 1)) {
        if (e.streamId === streamId && e.message && Object.keys(e.message).length > 0) await send(e.id, e.message);
      }
      return streamId;
    },
  };
}

// ---- HTTP ---------------------------------------------------------------------------------

const sessions = new Map(); // session id -> transport
const app = createMcpExpressApp({ host: '127.0.0.1' }); // rejects a non-loopback Host (403)

const jsonError = (res, status, message) =>
  res.status(status).json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });

app.post('/mcp', async (req, res) => {
  const sid = req.headers['mcp-session-id'];
  try {
    if (sid) {
      const transport = sessions.get(sid);
      if (!transport) return jsonError(res, 404, 'Session not found');
      return await transport.handleRequest(req, res, req.body);
    }
    if (req.body?.method !== 'initialize') return jsonError(res, 400, 'Missing Mcp-Session-Id');
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: newEventStore(),
      retryInterval: 200,
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
      server.close().catch(() => {});
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  } catch (err) {
    console.error('POST /mcp:', err);
    if (!res.headersSent) res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null });
  }
});

const bySession = async (req, res) => {
  const transport = sessions.get(req.headers['mcp-session-id']);
  if (!transport) return jsonError(res, req.headers['mcp-session-id'] ? 404 : 400, 'Unknown or missing Mcp-Session-Id');
  try {
    await transport.handleRequest(req, res);
  } catch (err) {
    console.error(`${req.method} /mcp:`, err);
    if (!res.headersSent) res.status(500).end();
  }
};
app.get('/mcp', bySession);
app.delete('/mcp', bySession);

const portArg = process.argv.indexOf('--port');
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 0;
const httpServer = app.listen(port, '127.0.0.1', () => {
  console.log(`listening http://127.0.0.1:${httpServer.address().port}/mcp`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
