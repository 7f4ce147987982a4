// Preloaded (node --require ./loopback.cjs) into servers that bind every interface, such as
// @modelcontextprotocol/server-everything: every net.Server listens on 127.0.0.1 instead, so
// a test on a shared machine opens nothing beyond loopback.
'use strict';
const net = require('node:net');

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (first !== null && typeof first === 'object' && !Array.isArray(first)) {
    if (first.path === undefined) args[0] = { ...first, host: '127.0.0.1' };
  } else if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    const cb = args.find((a) => typeof a === 'function');
    args = [{ port: Number(first), host: '127.0.0.1' }];
    if (cb) args.push(cb);
  }
  return listen.apply(this, args);
};
