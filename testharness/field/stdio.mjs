// A desktop client's view: the official TypeScript client's StdioClientTransport launches
// `stategate stdio -- COMMAND` as an mcpServers entry would (command, args, env, cwd), and
// talks to the stdio server behind it: hints on the list, a refused call that says what is
// possible now, the workflow advancing, list_changed as a notification on stdout, and the
// client's environment and working directory reaching the child.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { check, text, run } from './lib.mjs';

run(async () => {
  const workDir = process.env.WORK_DIR;
  const transport = new StdioClientTransport({
    command: process.env.STATEGATE_BIN,
    args: JSON.parse(process.env.STATEGATE_ARGS),
    env: { ...process.env, MEMORY_FILE_PATH: join(workDir, 'graph.jsonl') },
    cwd: workDir,
    stderr: 'inherit',
  });
  const client = new Client({ name: 'stategate-field-stdio', version: '1.0.0' }, { capabilities: {} });
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
  await client.connect(transport);

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  check(names.includes('create_entities'), 'the stdio server\'s tools are listed', names);
  check(!names.includes('add_observations'), 'add_observations is hidden before the workflow reaches filled', names);
  const create = tools.find((t) => t.name === 'create_entities');
  check(create.description.includes('[Cache-Control: no-store]'), 'create_entities carries the hint', create.description);

  const refused = await client.callTool({ name: 'add_observations', arguments: { observations: [{ entityName: 'stategate', contents: ['a gateway'] }] } });
  check(refused.isError && text(refused).includes('is not available now') && text(refused).includes('create_entities'),
    'add_observations is refused before create_entities, naming what is available', refused);

  const created = await client.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'stategate', entityType: 'project', observations: ['MCP gateway'] }] } });
  check(!created.isError, 'create_entities reaches the server', created);
  check(text(created).includes('Cache invalidated for read_graph'), 'its answer carries the invalidation block', text(created));

  const observed = await client.callTool({ name: 'add_observations', arguments: { observations: [{ entityName: 'stategate', contents: ['speaks stdio'] }] } });
  check(!observed.isError, 'the workflow advanced: add_observations is allowed now', observed);

  const after = await client.listTools();
  check(after.tools.some((t) => t.name === 'add_observations'), 'add_observations is listed now', after.tools.map((t) => t.name));
  for (let i = 0; i < 50 && changed === 0; i++) await new Promise((r) => setTimeout(r, 100));
  check(changed > 0, 'notifications/tools/list_changed arrived on stdout', changed);

  const file = join(workDir, 'graph.jsonl');
  check(existsSync(file) && readFileSync(file, 'utf8').includes('speaks stdio'),
    'the child ran with the client\'s environment (MEMORY_FILE_PATH) and working directory (its command is relative to it)', file);
  await client.close();
});
