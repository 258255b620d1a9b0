// The legacy era test server on the official TypeScript SDK v1 (@modelcontextprotocol/sdk 1.32.2):
// MCP 2025-11-25 only, over stdio or stateful streamable HTTP (sessions, a GET stream). It offers the
// feature set of common.mjs, by the same names as the SDK v2 server (era-server.mjs).
//
//   node legacy-server.mjs --stdio
//   node legacy-server.mjs --http PORT     http://127.0.0.1:PORT/mcp (PORT 0: the OS picks; the URL
//                                          is printed as `AHP-ERA-LISTENING <url>` on stdout)
//
// Server->client requests (elicitation, sampling, roots) are sent as related to the tool call
// (`extra.sendRequest`): over HTTP they travel on the call's own SSE stream.
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  ListRootsResultSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  isInitializeRequest,
} from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod/v4';
import {
  ELICIT_SCHEMA,
  EXTRA_TOOL,
  PROMPT,
  RESOURCE_URI,
  SAMPLE_PROMPT,
  TOOLS,
  bumpResource,
  eraServer,
  extraToolShown,
  flipExtraTool,
  jsonBody,
  listenHttp,
  option,
  pause,
  recordCancelled,
  resourceText,
  text,
  waitCancelled,
} from './common.mjs';

const NAME = 'era-v1-legacy';
/** Connected instances (one over stdio, one per HTTP session): they get change notifications. */
const live = new Set();

function build() {
  const server = eraServer(McpServer, NAME, '1.32.2', 'ahp-proxy era test server (SDK v1, legacy)');
  const self = { server, subscribed: new Set(), extra: undefined };

  server.registerTool(TOOLS.echo, { description: 'Echoes text', inputSchema: { text: z.string() } }, async ({ text: t }) =>
    text(`echo: ${t}`),
  );
  server.registerTool(
    TOOLS.progress,
    { description: 'Reports progress, then answers', inputSchema: { steps: z.number().int().optional() } },
    async ({ steps = 3 }, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (let progress = 1; progressToken !== undefined && progress <= steps; progress++) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, total: steps } });
      }
      return text(`progress: ${steps} steps`);
    },
  );
  server.registerTool(TOOLS.elicit, { description: 'Asks the user for an answer' }, async (extra) => {
    const got = await extra.sendRequest(
      { method: 'elicitation/create', params: { mode: 'form', message: 'Your answer?', requestedSchema: ELICIT_SCHEMA } },
      ElicitResultSchema,
    );
    return text(`elicit: ${got.action} ${got.content?.answer ?? ''}`);
  });
  server.registerTool(TOOLS.sample, { description: 'Asks the client for a completion' }, async (extra) => {
    const messages = [{ role: 'user', content: { type: 'text', text: SAMPLE_PROMPT } }];
    const got = await extra.sendRequest({ method: 'sampling/createMessage', params: { messages, maxTokens: 16 } }, CreateMessageResultSchema);
    return text(`sample: ${got.content?.text} (${got.model})`);
  });
  server.registerTool(TOOLS.roots, { description: "Lists the client's roots" }, async (extra) => {
    const got = await extra.sendRequest({ method: 'roots/list' }, ListRootsResultSchema);
    return text(`roots: ${got.roots.map((r) => r.uri).join(',')}`);
  });
  server.registerTool(TOOLS.changeTools, { description: `Shows or hides the tool ${EXTRA_TOOL}` }, async () => {
    const shown = flipExtraTool();
    for (const inst of live) (shown ? inst.extra.enable() : inst.extra.disable());
    return text(`tools changed: ${EXTRA_TOOL} ${shown ? 'shown' : 'hidden'}`);
  });
  server.registerTool(TOOLS.touchResource, { description: `Updates ${RESOURCE_URI}` }, async () => {
    const version = bumpResource();
    for (const inst of live) {
      if (inst.subscribed.has(RESOURCE_URI)) await inst.server.server.sendResourceUpdated({ uri: RESOURCE_URI }).catch(() => {});
    }
    return text(`resource updated: version ${version}`);
  });
  server.registerTool(
    TOOLS.slow,
    { description: 'Runs until cancelled (60 s at most)', inputSchema: { tag: z.string() } },
    async ({ tag }, extra) => {
      const progressToken = extra._meta?.progressToken;
      const deadline = Date.now() + 60000;
      for (let progress = 1; !extra.signal.aborted && Date.now() < deadline; progress++) {
        if (progressToken !== undefined) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress } }).catch(() => {});
        }
        await pause(50, extra.signal);
      }
      if (extra.signal.aborted) recordCancelled(tag);
      return text(extra.signal.aborted ? `slow: cancelled ${tag}` : `slow: finished ${tag}`);
    },
  );
  server.registerTool(
    TOOLS.cancelReport,
    {
      description: 'Says whether the slow call `tag` saw its cancellation (waits waitMs for it)',
      inputSchema: { tag: z.string(), waitMs: z.number().int().optional() },
    },
    async ({ tag, waitMs }) => text((await waitCancelled(tag, waitMs)) ? `cancelled: ${tag}` : `not cancelled: ${tag}`),
  );
  self.extra = server.registerTool(EXTRA_TOOL, { description: 'Shown or hidden by change_tools' }, async () => text('extra'));
  if (!extraToolShown()) self.extra.disable();

  const about = { mimeType: 'text/plain', description: 'Updated by touch_resource' };
  server.registerResource('watched', RESOURCE_URI, about, async () => ({
    contents: [{ uri: RESOURCE_URI, mimeType: 'text/plain', text: resourceText() }],
  }));
  server.server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    self.subscribed.add(request.params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    self.subscribed.delete(request.params.uri);
    return {};
  });
  server.registerPrompt(PROMPT, { description: 'A greeting', argsSchema: { who: z.string() } }, async ({ who }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${who}!` } }],
  }));

  live.add(self);
  server.server.onclose = () => live.delete(self);
  return server;
}

const argv = process.argv.slice(2);
if (argv.includes('--stdio')) {
  await build().connect(new StdioServerTransport());
} else if (option(argv, '--http') !== undefined) {
  const sessions = new Map();
  listenHttp(option(argv, '--http'), NAME, async (req, res) => {
    const body = await jsonBody(req, res);
    if (body === false) return;
    const sid = [req.headers['mcp-session-id']].flat()[0];
    let transport = sid ? sessions.get(sid) : undefined;
    if (!transport && !sid && req.method === 'POST' && isInitializeRequest(body)) {
      const server = build();
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await server.connect(transport);
    }
    if (!transport) {
      // What SDK v1's own examples answer: a request without a session is not served.
      const [status, code, message] = sid ? [404, -32001, 'Session not found'] : [400, -32000, 'Bad Request: Server not initialized'];
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
      return;
    }
    await transport.handleRequest(req, res, body);
  });
} else {
  console.error('usage: legacy-server.mjs --stdio | --http PORT');
  process.exit(2);
}
