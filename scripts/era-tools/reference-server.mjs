// A reference server for the MCP conformance suite on SDK v2, dual-era (the project's own): the
// fixture of reference-fixture.mjs served over streamable HTTP or stdio. `scripts/era.sh server
// conformance` runs it, `scripts/conformance.sh reference --sdk` runs the suite against it.
//
//   node reference-server.mjs --stdio
//       serveStdio: the opening message pins the connection's era (`initialize`: 2025-11-25,
//       an enveloped request such as `server/discover`: 2026-07-28)
//   node reference-server.mjs --http PORT
//       http://127.0.0.1:PORT/mcp (PORT 0: the OS picks; the URL is printed as
//       `AHP-ERA-LISTENING <url>` on stdout). Requests whose Host or Origin is not localhost get
//       403 (DNS rebinding). 2026-07-28 requests: createMcpHandler, a new instance per request;
//       2025-11-25 requests: stateful sessions (v2-serving.mjs) with an event store, so that a
//       closed SSE stream can be resumed with Last-Event-ID.
import { createMcpHandler } from '@modelcontextprotocol/server';
import { localhostHostValidation, localhostOriginValidation } from '@modelcontextprotocol/node';
import { listenHttp, option } from './common.mjs';
import { MemoryEventStore, dualEraHandler, whileConnected } from './v2-serving.mjs';
import { NAME, referenceServer } from './reference-fixture.mjs';

/** How long a client waits before it reconnects a closed SSE stream (the `retry` field). */
const RETRY_MS = 1000;

const argv = process.argv.slice(2);
const onerror = (e) => console.error(`${NAME}: ${e?.message ?? e}`);

/** Instances with a connection of their own (stdio, legacy HTTP sessions). */
const live = new Set();
/** The HTTP handler of 2026-07-28 requests: it delivers changes to their listen streams. */
let modern;

/** A list changed: tell every connection and every listen stream. */
function changed(kind) {
  for (const server of live) {
    if (kind === 'tools') server.sendToolListChanged();
    else server.sendPromptListChanged();
  }
  if (kind === 'tools') modern?.notify.toolsChanged();
  else modern?.notify.promptsChanged();
}

/** An instance that gets list changes while its connection lasts. */
const liveServer = () => whileConnected(live, referenceServer({ changed }));

if (argv.includes('--stdio')) {
  const { serveStdio } = await import('@modelcontextprotocol/server/stdio');
  serveStdio(liveServer, { onerror });
} else if (option(argv, '--http') !== undefined) {
  modern = createMcpHandler(() => referenceServer({ changed }), { legacy: 'reject', onerror });
  const handle = dualEraHandler({
    modern,
    legacyServer: liveServer,
    sessionOptions: () => ({ eventStore: new MemoryEventStore(), retryInterval: RETRY_MS }),
    onerror,
  });
  const hostAllowed = localhostHostValidation();
  const originAllowed = localhostOriginValidation();
  listenHttp(option(argv, '--http'), NAME, (req, res) => {
    if (!hostAllowed(req, res) || !originAllowed(req, res)) return;
    return handle(req, res);
  });
} else {
  console.error('usage: reference-server.mjs --stdio | --http PORT');
  process.exit(2);
}
