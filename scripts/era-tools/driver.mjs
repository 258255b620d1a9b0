// The era client driver: one official TypeScript SDK client (v1 1.32.2, or v2 2.4.0 in a chosen
// version-negotiation mode) runs the era scenarios against one MCP endpoint and prints one JSON line
// per scenario on stdout: {"scenario", "ok", "sdk", "mode", "era", "version", "server", "observed",
// "error"?}. A connection that fails makes every scenario fail with the connection's error.
//
//   node driver.mjs --sdk v1|v2 --mode legacy|modern|auto --scenario NAME[,NAME...]|all
//                   [--wait-ms MS] (--url URL | --command CMD ARGS...)
//
// --sdk v1 speaks 2025-11-25 only (--mode legacy). --sdk v2: legacy = the SDK's default
// (`initialize` at 2025-11-25), modern = pinned to 2026-07-28 (no fallback), auto = probe with
// server/discover and fall back to `initialize`. --command takes the rest of the line (a stdio
// server or `ahp-proxy serve --stdio ...`). --wait-ms (default 10000) bounds every wait for a
// notification or a cancellation: a hang guard, not a measurement.
//
// Scenarios (servers: era-server.mjs, legacy-server.mjs; names in common.mjs):
//   list              tools/list, resources/list, prompts/list hold the common names
//   call              echo, resources/read, prompts/get
//   progress          a call with a progress token gets its 3 progress notifications
//   elicit            the server asks for a form; the client answers {answer: "forty-two"}
//   sample            the server asks for a completion; the client answers "sampled" (model "era-model")
//   roots             the server asks for roots; the client has file:///era/root
//   list_changed      change_tools makes tools/list_changed reach the client (legacy: unsolicited;
//                     modern: on a subscriptions/listen stream)
//   resource_updated  touch_resource makes notifications/resources/updated reach the client (legacy:
//                     after resources/subscribe; modern: listen with resourceSubscriptions)
//   cancel            a slow call is cancelled after its first progress; the server reports it saw it
// The client answers every elicitation, sampling and roots request with the fixed values above
// (legacy: server->client requests; modern: input_required rounds, which SDK v2 fulfils with the
// same handlers).
import { randomUUID } from 'node:crypto';
import { EXTRA_TOOL, PROMPT, RESOURCE_URI, TOOLS } from './common.mjs';

export const SCENARIOS = ['list', 'call', 'progress', 'elicit', 'sample', 'roots', 'list_changed', 'resource_updated', 'cancel'];
const ANSWER = 'forty-two';
const SAMPLED = 'sampled';
const MODEL = 'era-model';
const ROOTS = [{ uri: 'file:///era/root', name: 'era-root' }];
const CAPABILITIES = { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } };
const SAMPLE_RESULT = { role: 'assistant', content: { type: 'text', text: SAMPLED }, model: MODEL };

// ---- arguments ----
const argv = process.argv.slice(2);
const at = argv.indexOf('--command');
const command = at >= 0 ? argv.slice(at + 1) : undefined;
const flags = at >= 0 ? argv.slice(0, at) : argv;
const flag = (name, fallback) => {
  const i = flags.indexOf(name);
  return i >= 0 ? flags[i + 1] : fallback;
};
const sdk = flag('--sdk', 'v2');
const mode = flag('--mode', 'legacy');
const url = flag('--url');
const waitMs = Number(flag('--wait-ms', '10000'));
const wanted = flag('--scenario', 'all');
const scenarios = wanted === 'all' ? SCENARIOS : wanted.split(',');
const usage = (why) => {
  console.error(
    `driver.mjs: ${why}\nusage: driver.mjs --sdk v1|v2 --mode legacy|modern|auto --scenario NAME[,NAME]|all ` +
      '[--wait-ms MS] (--url URL | --command CMD ARGS...)',
  );
  process.exit(2);
};
if (!['v1', 'v2'].includes(sdk)) usage(`--sdk ${sdk}`);
if (!['legacy', 'modern', 'auto'].includes(mode) || (sdk === 'v1' && mode !== 'legacy')) usage(`--mode ${mode} with --sdk ${sdk}`);
if (!url === !command || (command && command.length === 0)) usage('one of --url or --command');
for (const s of scenarios) if (!SCENARIOS.includes(s)) usage(`unknown scenario ${s} (${SCENARIOS.join(', ')}, all)`);

// ---- one SDK behind one small face ----
const fetches = []; // what the HTTP transport did since the last line: "POST 200", "GET 405", ...
let getRefused = false; // the server refused the GET stream of unsolicited messages
const recordingFetch = async (input, init = {}) => {
  const res = await fetch(input, init);
  const method = init.method ?? 'GET';
  fetches.push(`${method} ${res.status}`);
  if (method === 'GET' && res.status >= 400) getRefused = true;
  return res;
};

/** The SDK's client, connected, behind the methods the scenarios use. */
async function connect() {
  const c = sdk === 'v1' ? await connectV1() : await connectV2();
  tapProgress(c.transport);
  return c;
}

// What arrived on the wire. Progress by token: SDK v1's and v2's clients lose the progress
// notifications that arrive in the same read as their call's result (they dispatch notifications
// a microtask late and drop the call's progress handler at once), so the scenarios judge what
// came, and show what the SDK's callback saw beside it. And how the server asked for input:
// `request <method>` (a legacy server->client request) or `input_required <method>...` (a
// 2026-07-28 result), in `wire`, emptied by each scenario's line.
const wireProgress = new Map();
const wire = [];
function tapProgress(transport) {
  const onmessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message?.method === 'notifications/progress') {
      const token = String(message.params?.progressToken);
      wireProgress.set(token, [...(wireProgress.get(token) ?? []), message.params?.progress]);
    } else if (message?.method !== undefined && message.id !== undefined) {
      wire.push(`request ${message.method}`);
    } else if (message?.result?.resultType === 'input_required') {
      const asks = Object.values(message.result.inputRequests ?? {}).map((r) => r.method);
      wire.push(['input_required', ...asks].join(' '));
    }
    return onmessage?.call(transport, message, extra);
  };
}
/** The progress values of the notifications that arrived since `mark` (a set of tokens). */
const progressSince = (mark) => [...wireProgress].filter(([token]) => !mark.has(token)).flatMap(([, values]) => values);

async function connectV2() {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const versionNegotiation = { mode: mode === 'modern' ? { pin: '2026-07-28' } : mode };
  const client = new Client({ name: 'ahp-era-driver', version: '1.0.0' }, { versionNegotiation, capabilities: CAPABILITIES });
  const asked = { elicit: 0, sample: 0, roots: 0 };
  client.setRequestHandler('elicitation/create', async () => (asked.elicit++, { action: 'accept', content: { answer: ANSWER } }));
  client.setRequestHandler('sampling/createMessage', async () => (asked.sample++, SAMPLE_RESULT));
  client.setRequestHandler('roots/list', async () => (asked.roots++, { roots: ROOTS }));
  let transport;
  if (url) {
    transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
  } else {
    const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
    transport = new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'inherit' });
  }
  await client.connect(transport);
  return {
    ...face(client, asked),
    era: client.getProtocolEra(),
    version: client.getNegotiatedProtocolVersion(),
    callTool: (name, args, options) => client.callTool({ name, arguments: args }, options),
    onNotification: (method, fn) => client.setNotificationHandler(method, fn),
    listen: (filter) => client.listen(filter),
  };
}

/** What both SDKs' clients do alike. */
const face = (client, asked) => ({
  asked,
  transport: client.transport,
  server: client.getServerVersion()?.name,
  listTools: () => client.listTools(),
  listResources: () => client.listResources(),
  listPrompts: () => client.listPrompts(),
  readResource: (uri) => client.readResource({ uri }),
  getPrompt: (name, args) => client.getPrompt({ name, arguments: args }),
  subscribe: (uri) => client.subscribeResource({ uri }),
  unsubscribe: (uri) => client.unsubscribeResource({ uri }),
  close: () => client.close(),
});

async function connectV1() {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const types = await import('@modelcontextprotocol/sdk/types.js');
  const client = new Client({ name: 'ahp-era-driver', version: '1.0.0' }, { capabilities: CAPABILITIES });
  const asked = { elicit: 0, sample: 0, roots: 0 };
  client.setRequestHandler(types.ElicitRequestSchema, async () => (asked.elicit++, { action: 'accept', content: { answer: ANSWER } }));
  client.setRequestHandler(types.CreateMessageRequestSchema, async () => (asked.sample++, SAMPLE_RESULT));
  client.setRequestHandler(types.ListRootsRequestSchema, async () => (asked.roots++, { roots: ROOTS }));
  let transport;
  if (url) {
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
  } else {
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    transport = new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'inherit' });
  }
  // SDK v1 keeps the negotiated version to itself; it hands it to the transport.
  let version;
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => ((version = v), setVersion?.(v));
  await client.connect(transport);
  const schemas = {
    'notifications/tools/list_changed': types.ToolListChangedNotificationSchema,
    'notifications/resources/updated': types.ResourceUpdatedNotificationSchema,
  };
  return {
    ...face(client, asked),
    era: 'legacy',
    version,
    callTool: (name, args, options) => client.callTool({ name, arguments: args }, undefined, options),
    onNotification: (method, fn) => client.setNotificationHandler(schemas[method], fn),
    listen: () => Promise.reject(new Error('SDK v1 has no subscriptions/listen')),
  };
}

// ---- scenarios: each returns {ok, observed} ----
const textOf = (result) => result?.content?.find((c) => c.type === 'text')?.text;

/** A promise resolved by the next matching notification, and whether it came. */
function expectNotification(c, method, matches = () => true) {
  let resolve;
  const seen = { count: 0, promise: new Promise((r) => (resolve = r)) };
  c.onNotification(method, (n) => {
    if (!matches(n)) return;
    seen.count++;
    resolve(true);
  });
  return seen;
}
/** true once `seen` resolved, false after --wait-ms; a refused GET stream (legacy HTTP) ends the
 *  wait at once: with no stream for unsolicited messages, the notification could only have come on
 *  the triggering call's own response, which is over. */
async function arrived(c, seen) {
  if (c.era === 'legacy' && getRefused && seen.count === 0) return false;
  return Promise.race([seen.promise, new Promise((r) => setTimeout(() => r(false), waitMs))]);
}

const run = {
  async list(c) {
    const tools = (await c.listTools()).tools.map((t) => t.name);
    const resources = (await c.listResources()).resources.map((r) => r.uri);
    const prompts = (await c.listPrompts()).prompts.map((p) => p.name);
    const ok = Object.values(TOOLS).every((t) => tools.includes(t)) && resources.includes(RESOURCE_URI) && prompts.includes(PROMPT);
    return { ok, observed: { tools, resources, prompts } };
  },
  async call(c) {
    const echo = textOf(await c.callTool(TOOLS.echo, { text: 'hello' }));
    const resource = (await c.readResource(RESOURCE_URI)).contents?.[0]?.text;
    const prompt = (await c.getPrompt(PROMPT, { who: 'era' })).messages?.[0]?.content?.text;
    const ok = echo === 'echo: hello' && /^watched resource, version \d+$/.test(resource ?? '') && prompt === 'Hello, era!';
    return { ok, observed: { echo, resource, prompt } };
  },
  async progress(c) {
    const callback = [];
    const mark = new Set(wireProgress.keys());
    const result = textOf(await c.callTool(TOOLS.progress, { steps: 3 }, { onprogress: (p) => callback.push(p.progress) }));
    const progress = progressSince(mark);
    return { ok: result === 'progress: 3 steps' && progress.join() === '1,2,3', observed: { result, progress, callback } };
  },
  async elicit(c) {
    const result = await c.callTool(TOOLS.elicit, {});
    const text = textOf(result);
    return { ok: text === `elicit: accept ${ANSWER}`, observed: { result: text, isError: result.isError ?? false, asked: c.asked.elicit } };
  },
  async sample(c) {
    const result = await c.callTool(TOOLS.sample, {});
    const text = textOf(result);
    return { ok: text === `sample: ${SAMPLED} (${MODEL})`, observed: { result: text, isError: result.isError ?? false, asked: c.asked.sample } };
  },
  async roots(c) {
    const result = await c.callTool(TOOLS.roots, {});
    const text = textOf(result);
    return { ok: text === `roots: ${ROOTS[0].uri}`, observed: { result: text, isError: result.isError ?? false, asked: c.asked.roots } };
  },
  async list_changed(c) {
    const seen = expectNotification(c, 'notifications/tools/list_changed');
    const sub = c.era === 'modern' ? await c.listen({ toolsListChanged: true }) : undefined;
    const before = (await c.listTools()).tools.some((t) => t.name === EXTRA_TOOL);
    const result = textOf(await c.callTool(TOOLS.changeTools, {}));
    const notified = await arrived(c, seen);
    const after = (await c.listTools()).tools.some((t) => t.name === EXTRA_TOOL);
    await sub?.close();
    const observed = { result, notified, listen: sub?.honoredFilter, extra_before: before, extra_after: after };
    return { ok: notified === true, observed };
  },
  async resource_updated(c) {
    const seen = expectNotification(c, 'notifications/resources/updated', (n) => n.params?.uri === RESOURCE_URI);
    const sub = c.era === 'modern' ? await c.listen({ resourceSubscriptions: [RESOURCE_URI] }) : undefined;
    if (!sub) await c.subscribe(RESOURCE_URI);
    const result = textOf(await c.callTool(TOOLS.touchResource, {}));
    const notified = await arrived(c, seen);
    const text = (await c.readResource(RESOURCE_URI)).contents?.[0]?.text;
    if (sub) await sub.close();
    else await c.unsubscribe(RESOURCE_URI);
    return { ok: notified === true, observed: { result, notified, listen: sub?.honoredFilter, resource: text } };
  },
  async cancel(c) {
    const tag = randomUUID();
    const abort = new AbortController();
    let progress = 0;
    const onprogress = () => (progress++ === 0 ? abort.abort('era driver cancels') : undefined);
    let call;
    try {
      call = `answered: ${textOf(await c.callTool(TOOLS.slow, { tag }, { signal: abort.signal, onprogress }))}`;
    } catch (e) {
      call = `rejected: ${e?.message ?? e}`;
    }
    const report = textOf(await c.callTool(TOOLS.cancelReport, { tag, waitMs }, { timeout: waitMs + 20000 }));
    return { ok: abort.signal.aborted && report === `cancelled: ${tag}`, observed: { call, progress, report } };
  },
};

function withGuard(promise, what) {
  let timer;
  const guard = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer in ${waitMs + 30000} ms`)), waitMs + 30000)));
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}

const base = { sdk, mode };
let c;
try {
  c = await withGuard(connect(), 'connect');
} catch (e) {
  const error = `connect: ${e?.code ? `${e.code}: ` : ''}${e?.message ?? e}`;
  for (const scenario of scenarios) console.log(JSON.stringify({ scenario, ok: false, ...base, error, ...(url ? { http: fetches } : {}) }));
  process.exit(1);
}
Object.assign(base, { era: c.era, version: c.version, server: c.server });
let failed = 0;
for (const scenario of scenarios) {
  let line;
  try {
    const { ok, observed } = await withGuard(run[scenario](c), scenario);
    line = { scenario, ok, ...base, observed };
  } catch (e) {
    line = { scenario, ok: false, ...base, error: `${e?.code ? `${e.code}: ` : ''}${e?.message ?? e}` };
  }
  if (!line.ok) failed++;
  line.wire = wire.splice(0);
  if (url) line.http = fetches.splice(0);
  console.log(JSON.stringify(line));
}
await c.close().catch(() => {});
process.exit(failed ? 1 : 0);
