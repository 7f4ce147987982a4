// Module hook used by run.mjs on Node < 22: resolves the conformance bundle's `fs` import to
// node:fs plus a globSync stub (see run.mjs).
const SHIM = 'stategate-shim:fs';
const SOURCE = `export * from 'node:fs';
export { default } from 'node:fs';
export function globSync() {
  throw new Error('fs.globSync needs Node >= 22 (only the conformance tier-check command uses it)');
}
`;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') &&
      context.parentURL && context.parentURL.includes('/@modelcontextprotocol/conformance/')) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url === SHIM) {
    return { format: 'module', source: SOURCE, shortCircuit: true };
  }
  return next(url, context);
}
