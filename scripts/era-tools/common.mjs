// What the era servers share (scripts/era-tools: legacy-server.mjs on SDK v1, era-server.mjs on
// SDK v2): the feature set's names and fixed values, the process-wide record of cancelled calls,
// the tool list's toggle, the servers' shape (capabilities, text results) and the small HTTP
// listener. The client driver (driver.mjs) imports the same names, so a renamed tool cannot pass
// unnoticed.
import { createServer } from 'node:http';

/** The tools every era server offers, by the same names. */
export const TOOLS = {
  echo: 'echo', // {text} -> "echo: <text>"
  progress: 'progress', // {steps?} -> progress notifications 1..steps, then "progress: <steps> steps"
  elicit: 'elicit', // asks the client for {answer} (legacy: elicitation/create; modern: input_required)
  sample: 'sample', // asks the client for a completion (sampling/createMessage)
  roots: 'roots', // asks the client for its roots (roots/list)
  changeTools: 'change_tools', // shows or hides the tool `extra`: tools/list_changed (legacy) / on listen (modern)
  touchResource: 'touch_resource', // updates the resource: notifications/resources/updated
  slow: 'slow', // {tag} reports progress every 50 ms until cancelled (at most 60 s)
  cancelReport: 'cancel_report', // {tag, waitMs?} "cancelled: <tag>" once that slow call saw its cancellation
};
/** The tool change_tools shows and hides. */
export const EXTRA_TOOL = 'extra';
/** The subscribable resource and the prompt. */
export const RESOURCE_URI = 'era://watched';
export const PROMPT = 'greet'; // {who} -> "Hello, <who>!"

/** The schema of the elicit tool's form. */
export const ELICIT_SCHEMA = {
  type: 'object',
  properties: { answer: { type: 'string' } },
  required: ['answer'],
};
export const SAMPLE_PROMPT = 'Reply with one word.';

// ---- process-wide state (HTTP servers serve each request or session from a new instance) ----

let resourceVersion = 0;
/** The resource's text; touch_resource bumps its version. */
export const resourceText = () => `watched resource, version ${resourceVersion}`;
export const bumpResource = () => ++resourceVersion;

let extraShown = false;
/** Whether the tool `extra` is listed; change_tools flips it. */
export const extraToolShown = () => extraShown;
export const flipExtraTool = () => (extraShown = !extraShown);

const cancelled = new Set();
const cancelWaiters = new Map();
/** A slow call tagged `tag` saw its cancellation. */
export function recordCancelled(tag) {
  cancelled.add(tag);
  for (const wake of cancelWaiters.get(tag) ?? []) wake(true);
  cancelWaiters.delete(tag);
}
/** Resolves true once the slow call tagged `tag` saw its cancellation, false after `ms`. */
export function waitCancelled(tag, ms = 15000) {
  if (cancelled.has(tag)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const wake = (v) => {
      clearTimeout(timer);
      resolve(v);
    };
    cancelWaiters.set(tag, [...(cancelWaiters.get(tag) ?? []), wake]);
  });
}

/** A tool result of one text block. */
export const text = (t) => ({ content: [{ type: 'text', text: t }] });

/**
 * An era server's `McpServer` (`McpServer`: the SDK's class, v1 or v2), as `name` `version`
 * with `instructions`: every list announces its changes, resources can be subscribed to.
 */
export function eraServer(McpServer, name, version, instructions) {
  return new McpServer(
    { name, version },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
      },
      instructions,
    },
  );
}

/** Waits `ms`, or less when `signal` aborts. */
export const pause = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });

// ---- command line and HTTP ----

/** `--name value` from argv (undefined when absent). */
export function option(argv, name) {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}

/**
 * Serves `handle(req, res)` on 127.0.0.1:`port` (0: the OS picks one) and prints
 * `AHP-ERA-LISTENING http://127.0.0.1:<port>/mcp` on stdout once it listens. Requests to paths other
 * than /mcp get 404.
 */
export function listenHttp(port, label, handle) {
  const server = createServer((req, res) => {
    if (!req.url || !(req.url === '/mcp' || req.url.startsWith('/mcp?'))) {
      res.writeHead(404).end();
      return;
    }
    Promise.resolve(handle(req, res)).catch((error) => {
      console.error(`${label}: ${error?.stack ?? error}`);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null }));
    });
  });
  server.listen(Number(port), '127.0.0.1', () => {
    const url = `http://127.0.0.1:${server.address().port}/mcp`;
    console.log(`AHP-ERA-LISTENING ${url}`);
    console.error(`${label}: listening on ${url}`);
  });
  return server;
}

/** A POST's body as JSON (undefined when empty, or for other methods); `false` once a body that
 *  is not JSON got its 400 -32700 answer. */
export async function jsonBody(req, res) {
  if (req.method !== 'POST') return undefined;
  let text = '';
  for await (const chunk of req) text += chunk;
  try {
    return text === '' ? undefined : JSON.parse(text);
  } catch {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null }));
    return false;
  }
}
