// run.mjs runs stategate jobs through the real Node Extism host (@extism/extism 1.0.3).
//
//   node run.mjs jobs.json              -> {"results": [{"output": "..."} | {"error": "..."}, ...]}
//   node run.mjs jobs.json --bench N    -> {"perCallMicros": [..one per job..]}
//
// jobs.json: {"wasm": "/abs/path/stategate.wasm",
//             "jobs": [{"config": "<JSON as string>", "function": "check_limits", "input": "<JSON>"}]}
//
// One plugin is created per distinct config string and reused by every job with that config.
// Notes on the 1.0.3 API (read from node_modules/@extism/extism/dist/esm/mod.js):
//   - the plugin's config comes only from the options' `config` (a manifest's `config` is
//     ignored by createPlugin), so it is passed as {config: {config: <string>}};
//   - `useWasi: true` uses node:wasi, whose initialize() runs the reactor's _initialize once;
//   - call() returns a PluginOutput (a DataView over the output block) or null when the guest
//     set no output; it throws when the guest set an error; the export's i32 is ignored;
//   - the host frees no blocks between calls, so each call is followed by plugin.reset();
//   - a config value of "" makes the host's config_get throw ("failed to store output"), so an
//     empty config string is passed as an absent key (the guest then reports CONFIG_MISSING,
//     as the native engine does for empty config).
import { readFile } from 'node:fs/promises';

// node:wasi emits an ExperimentalWarning when loaded; keep stderr for real problems only.
process.removeAllListeners('warning');
process.on('warning', (w) => {
  if (w.name === 'ExperimentalWarning' && /WASI/.test(w.message)) return;
  process.stderr.write(`${w.name}: ${w.message}\n`);
});
const { default: createPlugin } = await import('@extism/extism');

// fatal: reject invalid UTF-8 rather than replacing it; ignoreBOM: keep a leading BOM as-is.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

function fail(msg) {
  process.stderr.write(`run.mjs: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = argv.slice(2);
  let file = null;
  let bench = 0;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--bench') {
      const n = Number(args[++i]);
      if (!Number.isInteger(n) || n <= 0) fail(`--bench needs a positive integer, got ${args[i]}`);
      bench = n;
    } else if (file === null) {
      file = args[i];
    } else {
      fail(`unexpected argument ${args[i]}`);
    }
  }
  if (file === null) fail('usage: node run.mjs jobs.json [--bench N]');
  return { file, bench };
}

async function loadJobFile(file) {
  let doc;
  try {
    doc = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    fail(`job file ${file}: ${err.message}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) fail(`job file ${file}: not a JSON object`);
  if (typeof doc.wasm !== 'string' || doc.wasm === '') fail(`job file ${file}: "wasm" must be a non-empty string`);
  if (!Array.isArray(doc.jobs)) fail(`job file ${file}: "jobs" must be an array`);
  doc.jobs.forEach((job, i) => {
    if (job === null || typeof job !== 'object' || Array.isArray(job)) fail(`job ${i}: not an object`);
    for (const key of ['config', 'function', 'input']) {
      if (typeof job[key] !== 'string') fail(`job ${i}: "${key}" must be a string`);
    }
    if (job.function === '') fail(`job ${i}: "function" is empty`);
  });
  return doc;
}

// call runs one export and answers its output as text, byte for byte.
async function call(plugin, fn, input) {
  try {
    const out = await plugin.call(fn, encoder.encode(input));
    if (out === null) return ''; // the guest set no output: Extism's empty output
    return utf8.decode(out.bytes());
  } finally {
    await plugin.reset();
  }
}

async function main() {
  const { file, bench } = parseArgs(process.argv);
  const doc = await loadJobFile(file);

  let module;
  try {
    module = await WebAssembly.compile(await readFile(doc.wasm));
  } catch (err) {
    fail(`wasm ${doc.wasm}: ${err.message}`);
  }

  const plugins = new Map(); // config string -> Promise<Plugin>
  const pluginFor = (config) => {
    if (!plugins.has(config)) {
      const p = createPlugin({ wasm: [{ module }] }, { useWasi: true, config: config === '' ? {} : { config } });
      p.catch(() => {}); // reported per job below
      plugins.set(config, p);
    }
    return plugins.get(config);
  };

  try {
    if (bench > 0) {
      const perCallMicros = [];
      for (const [i, job] of doc.jobs.entries()) {
        let plugin;
        try {
          plugin = await pluginFor(job.config);
        } catch (err) {
          fail(`job ${i}: creating plugin: ${err.message}`);
        }
        const input = encoder.encode(job.input);
        const warm = Math.min(bench, 200);
        for (let k = 0; k < warm; k++) {
          await plugin.call(job.function, input);
          await plugin.reset();
        }
        const t0 = process.hrtime.bigint();
        for (let k = 0; k < bench; k++) {
          const out = await plugin.call(job.function, input);
          if (out !== null) utf8.decode(out.bytes());
          await plugin.reset();
        }
        const ns = Number(process.hrtime.bigint() - t0);
        perCallMicros.push(Math.round(ns / bench / 10) / 100);
      }
      process.stdout.write(JSON.stringify({ perCallMicros }) + '\n');
      return;
    }

    const results = [];
    for (const [i, job] of doc.jobs.entries()) {
      try {
        const plugin = await pluginFor(job.config);
        results.push({ output: await call(plugin, job.function, job.input) });
      } catch (err) {
        results.push({ error: `job ${i} (${job.function}): ${err && err.message ? err.message : String(err)}` });
      }
    }
    process.stdout.write(JSON.stringify({ results }) + '\n');
  } finally {
    for (const p of plugins.values()) {
      try {
        await (await p).close();
      } catch {
        // a plugin that failed to create has nothing to close
      }
    }
  }
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
