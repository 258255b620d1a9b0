// The era test server on the official TypeScript SDK v2 (@modelcontextprotocol/server 2.4.0),
// dual-era (2025-11-25 and 2026-07-28) or modern-only, over stdio or streamable HTTP. It offers the
// feature set of common.mjs, by the same names as the SDK v1 server (legacy-server.mjs).
//
//   node era-server.mjs --stdio [--modern-only]
//       serveStdio: the opening message pins the connection's era (modern-only: `initialize` gets
//       -32022 naming 2026-07-28)
//   node era-server.mjs --http PORT [--modern-only | --legacy-http sessions|stateless]
//       http://127.0.0.1:PORT/mcp (PORT 0: the OS picks; the URL is printed as
//       `AHP-ERA-LISTENING <url>` on stdout). Modern requests go to createMcpHandler (stateless: a
//       new McpServer per request). Legacy requests:
//       - sessions (default): stateful 2025-11-25 sessions (v2-serving.mjs: Mcp-Session-Id, a GET
//         stream; the composition the SDK documents beside createMcpHandler), so that
//         server->client requests (elicitation, sampling, roots), list changes and resource updates
//         reach a legacy client;
//       - stateless: createMcpHandler's own `legacy: 'stateless'`, the SDK's default: each legacy
//         request is served alone, without a session, so a server->client request has nowhere to
//         go ("Client does not support form elicitation.") and unsolicited notifications are lost
//         (GET answers 405);
//       --modern-only: `legacy: 'reject'`, legacy requests get 400 -32022.
//
// Every tool is written once, in the 2026-07-28 style: elicit, sample and roots return
// `inputRequired(...)`; on a legacy connection with a session (stdio, HTTP sessions) the SDK's
// legacy shim turns that into real server->client requests.
import { McpServer, createMcpHandler, inputRequired } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
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
  listenHttp,
  option,
  pause,
  recordCancelled,
  resourceText,
  text,
  waitCancelled,
} from './common.mjs';
import { dualEraHandler, whileConnected } from './v2-serving.mjs';

const argv = process.argv.slice(2);
const modernOnly = argv.includes('--modern-only');
const legacyHttp = option(argv, '--legacy-http') ?? 'sessions';
const NAME = modernOnly ? 'era-v2-modern' : 'era-v2-dual';

/** Instances with a live connection (stdio, legacy HTTP sessions): they get change notifications. */
const live = new Set();
/** The HTTP handler of modern requests: it publishes changes to listen streams. */
let modernHandler;

function build({ era } = {}) {
  const server = eraServer(McpServer, NAME, '2.4.0', `ahp-proxy era test server (SDK v2, ${modernOnly ? 'modern-only' : 'dual-era'})`);
  const self = { server, era, subscribed: new Set(), extra: undefined };

  server.registerTool(TOOLS.echo, { description: 'Echoes text', inputSchema: z.object({ text: z.string() }) }, async ({ text: t }) =>
    text(`echo: ${t}`),
  );
  server.registerTool(
    TOOLS.progress,
    { description: 'Reports progress, then answers', inputSchema: z.object({ steps: z.number().int().optional() }) },
    async ({ steps = 3 }, ctx) => {
      const progressToken = ctx.mcpReq._meta?.progressToken;
      for (let progress = 1; progressToken !== undefined && progress <= steps; progress++) {
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress, total: steps } });
      }
      return text(`progress: ${steps} steps`);
    },
  );
  server.registerTool(TOOLS.elicit, { description: 'Asks the user for an answer', inputSchema: z.object({}) }, async (_a, ctx) => {
    const got = ctx.mcpReq.inputResponses?.answer;
    if (got === undefined) {
      return inputRequired({ inputRequests: { answer: inputRequired.elicit({ message: 'Your answer?', requestedSchema: ELICIT_SCHEMA }) } });
    }
    return text(`elicit: ${got.action} ${got.content?.answer ?? ''}`);
  });
  server.registerTool(TOOLS.sample, { description: 'Asks the client for a completion', inputSchema: z.object({}) }, async (_a, ctx) => {
    const got = ctx.mcpReq.inputResponses?.completion;
    if (got === undefined) {
      const messages = [{ role: 'user', content: { type: 'text', text: SAMPLE_PROMPT } }];
      return inputRequired({ inputRequests: { completion: inputRequired.createMessage({ messages, maxTokens: 16 }) } });
    }
    return text(`sample: ${got.content?.text} (${got.model})`);
  });
  server.registerTool(TOOLS.roots, { description: "Lists the client's roots", inputSchema: z.object({}) }, async (_a, ctx) => {
    const got = ctx.mcpReq.inputResponses?.roots;
    if (got === undefined) return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
    return text(`roots: ${(got.roots ?? []).map((r) => r.uri).join(',')}`);
  });
  server.registerTool(TOOLS.changeTools, { description: `Shows or hides the tool ${EXTRA_TOOL}`, inputSchema: z.object({}) }, async () => {
    const shown = flipExtraTool();
    for (const inst of live) (shown ? inst.extra.enable() : inst.extra.disable());
    modernHandler?.notify.toolsChanged();
    return text(`tools changed: ${EXTRA_TOOL} ${shown ? 'shown' : 'hidden'}`);
  });
  server.registerTool(TOOLS.touchResource, { description: `Updates ${RESOURCE_URI}`, inputSchema: z.object({}) }, async () => {
    const version = bumpResource();
    for (const inst of live) {
      if (inst.era === 'modern' || inst.subscribed.has(RESOURCE_URI)) {
        await inst.server.server.sendResourceUpdated({ uri: RESOURCE_URI }).catch(() => {});
      }
    }
    modernHandler?.notify.resourceUpdated(RESOURCE_URI);
    return text(`resource updated: version ${version}`);
  });
  server.registerTool(
    TOOLS.slow,
    { description: 'Runs until cancelled (60 s at most)', inputSchema: z.object({ tag: z.string() }) },
    async ({ tag }, ctx) => {
      const signal = ctx.mcpReq.signal;
      const progressToken = ctx.mcpReq._meta?.progressToken;
      const deadline = Date.now() + 60000;
      for (let progress = 1; !signal.aborted && Date.now() < deadline; progress++) {
        if (progressToken !== undefined) {
          await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress } }).catch(() => {});
        }
        await pause(50, signal);
      }
      if (signal.aborted) recordCancelled(tag);
      return text(signal.aborted ? `slow: cancelled ${tag}` : `slow: finished ${tag}`);
    },
  );
  server.registerTool(
    TOOLS.cancelReport,
    {
      description: 'Says whether the slow call `tag` saw its cancellation (waits waitMs for it)',
      inputSchema: z.object({ tag: z.string(), waitMs: z.number().int().optional() }),
    },
    async ({ tag, waitMs }) => text((await waitCancelled(tag, waitMs)) ? `cancelled: ${tag}` : `not cancelled: ${tag}`),
  );
  self.extra = server.registerTool(EXTRA_TOOL, { description: 'Shown or hidden by change_tools', inputSchema: z.object({}) }, async () =>
    text('extra'),
  );
  if (!extraToolShown()) self.extra.disable();

  const about = { mimeType: 'text/plain', description: 'Updated by touch_resource' };
  server.registerResource('watched', RESOURCE_URI, about, async () => ({
    contents: [{ uri: RESOURCE_URI, mimeType: 'text/plain', text: resourceText() }],
  }));
  server.server.setRequestHandler('resources/subscribe', async (request) => {
    self.subscribed.add(request.params.uri);
    return {};
  });
  server.server.setRequestHandler('resources/unsubscribe', async (request) => {
    self.subscribed.delete(request.params.uri);
    return {};
  });
  server.registerPrompt(PROMPT, { description: 'A greeting', argsSchema: z.object({ who: z.string() }) }, async ({ who }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${who}!` } }],
  }));
  return { server, self };
}

/** A factory whose instances get change notifications while connected. */
function liveFactory(ctx) {
  const { server, self } = build(ctx);
  return whileConnected(live, server, self);
}

if (argv.includes('--stdio')) {
  const { serveStdio } = await import('@modelcontextprotocol/server/stdio');
  serveStdio(liveFactory, { legacy: modernOnly ? 'reject' : 'serve', onerror: (e) => console.error(`${NAME}: ${e.message}`) });
} else if (option(argv, '--http') !== undefined) {
  const onerror = (e) => console.error(`${NAME}: ${e.message}`);
  const legacy = modernOnly ? 'reject' : legacyHttp === 'stateless' ? 'stateless' : undefined;
  if (legacy === undefined && legacyHttp !== 'sessions') throw new Error('--legacy-http sessions|stateless');
  modernHandler = createMcpHandler((ctx) => build(ctx).server, { legacy: legacy ?? 'reject', onerror });
  const handle =
    legacy !== undefined
      ? toNodeHandler(modernHandler, { onerror })
      : dualEraHandler({ modern: modernHandler, legacyServer: () => liveFactory({ era: 'legacy' }), onerror });
  listenHttp(option(argv, '--http'), NAME, handle);
} else {
  console.error('usage: era-server.mjs --stdio [--modern-only] | --http PORT [--modern-only | --legacy-http sessions|stateless]');
  process.exit(2);
}

