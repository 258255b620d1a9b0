// Preloaded with `node --import` by scripts/conformance.sh: a server that listens on a port
// without naming a host (as @modelcontextprotocol/server-everything's `app.listen(PORT)`)
// listens on 127.0.0.1 only instead of every interface.
import net from 'node:net';

const host = process.env.AHP_LISTEN_HOST || '127.0.0.1';
const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const first = args[0];
  const isPort =
    typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first));
  if (isPort && typeof args[1] !== 'string') {
    args.splice(1, 0, host);
  } else if (first && typeof first === 'object' && 'port' in first && !first.host) {
    args[0] = { ...first, host };
  }
  return listen.apply(this, args);
};
