// A minimal MCP harness over streamable HTTP (no SDK): initialize, then one tools/call whose
// answer arrives only once an AHP client has decided on it. Used by shoot.mjs; runnable alone:
//   node harness.mjs http://127.0.0.1:47702/mcp notes__add_note '{"title":"t","text":"x"}'

const PROTOCOL = '2025-11-25';

/** POST one JSON-RPC message; returns the JSON-RPC answer with the given id (JSON or SSE body). */
async function post(url, session, message) {
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL,
  };
  if (session) headers['mcp-session-id'] = session;
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(message) });
  if (!response.ok && response.status !== 202) {
    throw new Error(`${message.method}: HTTP ${response.status} ${await response.text()}`);
  }
  const sessionId = response.headers.get('mcp-session-id') ?? session;
  if (message.id === undefined) return { sessionId };
  const type = response.headers.get('content-type') ?? '';
  const text = await response.text();
  if (type.startsWith('application/json')) return { sessionId, answer: JSON.parse(text) };
  // text/event-stream: the answer is the data event carrying our id; progress events come first.
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
    if (!data) continue;
    const event = JSON.parse(data);
    if (event.id === message.id) return { sessionId, answer: event };
  }
  throw new Error(`${message.method}: no answer in the event stream`);
}

/** Connect as a harness; returns call(name, args) → the tools/call answer. */
export async function connect(url) {
  const init = await post(url, undefined, {
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'vscode-picture-harness', version: '1.0.0' } },
  });
  if (init.answer.error) throw new Error(`initialize: ${JSON.stringify(init.answer.error)}`);
  const session = init.sessionId;
  await post(url, session, { jsonrpc: '2.0', method: 'notifications/initialized' });
  let next = 2;
  return {
    async listTools() {
      const { answer } = await post(url, session, { jsonrpc: '2.0', id: next++, method: 'tools/list', params: {} });
      return answer.result.tools;
    },
    async call(name, args) {
      const { answer } = await post(url, session, {
        jsonrpc: '2.0', id: next++, method: 'tools/call', params: { name, arguments: args },
      });
      return answer;
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [url, name, args] = process.argv.slice(2);
  const harness = await connect(url);
  console.log(JSON.stringify(await harness.call(name, JSON.parse(args ?? '{}')), null, 1));
}
