// Runs the official MCP conformance CLI (@modelcontextprotocol/conformance) with the same
// arguments, on Node 20 as well as 22+.
//
// The CLI's bundle imports `globSync` from `fs` (Node >= 22) at link time although only its
// `tier-check` command calls it, so on Node 20 it dies before parsing any argument. Where
// fs.globSync is missing, a module hook hands the CLI a `fs` that re-exports node:fs plus a
// globSync that throws when called. Nothing else in the suite is touched.
import { register } from 'node:module';
import fs from 'node:fs';

if (typeof fs.globSync !== 'function') {
  register(new URL('./fs-glob-hook.mjs', import.meta.url));
}
await import('@modelcontextprotocol/conformance/dist/index.js');
