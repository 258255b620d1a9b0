// A client for the MCP conformance suite's client scenarios, on the official TypeScript SDK v2
// (@modelcontextprotocol/client 2.4.0): `scripts/conformance.sh client --sdk-client` runs it.
// Written for ahp-proxy from what the suite's client scenarios ask for and check
// (@modelcontextprotocol/conformance 0.2.0-alpha.12, as installed from npm).
//
//   node reference-client.mjs URL
//
// The suite starts a mock server per scenario and runs this with the mock's URL, and in the
// environment MCP_CONFORMANCE_SCENARIO (the scenario), MCP_CONFORMANCE_PROTOCOL_VERSION and,
// for some scenarios, MCP_CONFORMANCE_CONTEXT (JSON; `toolCalls`: the calls to make). The client
// does the same for every scenario: it connects (2026-07-28: the SDK's negotiation, which also
// retries after a -32022; earlier versions: `initialize`), lists the tools and calls them (the
// context's calls, or each listed tool with arguments made up from its input schema), then lists
// and reads one resource and gets one prompt when the server offers them. It declares
// elicitation, sampling and roots and answers each with fixed values; the SDK fulfils the
// 2026-07-28 `input_required` rounds with the same handlers. Headers (Mcp-Method, Mcp-Name,
// Mcp-Param-*), the per-request `_meta` and the exclusion of tools with invalid `x-mcp-header`
// annotations are the SDK's own. OAuth (the `auth/*` scenarios) is not done.
//
// One scenario needs a step of its own: json-schema-2020-12-preservation wants the focal tool's
// input schema sent back, verbatim, to its echo tool.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const url = process.argv[2];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const version = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION ?? '2025-11-25';
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}');
const say = (line) => console.error(`reference-client [${scenario}]: ${line}`);

if (!url) {
  console.error('usage: reference-client.mjs URL (the suite sets MCP_CONFORMANCE_SCENARIO and friends)');
  process.exit(2);
}

const MODERN = '2026-07-28';
const versionNegotiation = { mode: version === MODERN ? 'auto' : 'legacy' };
const client = new Client(
  { name: 'ahp-proxy-reference-client', version: '1.0.0' },
  { versionNegotiation, capabilities: { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } } },
);
client.setRequestHandler('elicitation/create', async (request) => {
  const properties = request.params?.requestedSchema?.properties ?? {};
  return { action: 'accept', content: Object.fromEntries(Object.entries(properties).map(([k, s]) => [k, sample(s)])) };
});
client.setRequestHandler('sampling/createMessage', async () => ({
  role: 'assistant',
  content: { type: 'text', text: 'A sampled answer.' },
  model: 'reference-client-model',
  stopReason: 'endTurn',
}));
client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///reference-client/root', name: 'root' }] }));

/** A value of the JSON Schema `schema` (its default, its first enum value, or one of its type). */
function sample(schema = {}) {
  if (schema.default !== undefined) return schema.default;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const type = [schema.type].flat()[0];
  if (type === 'number' || type === 'integer') return 1;
  if (type === 'boolean') return true;
  if (type === 'array') return [];
  if (type === 'object') return argumentsFor(schema);
  return 'test';
}

/** Arguments for a tool: a value for each required property. */
function argumentsFor(schema = {}) {
  const required = schema.required ?? [];
  return Object.fromEntries(required.map((name) => [name, sample(schema.properties?.[name])]));
}

/** Runs `what`, saying on stderr when it fails (a scenario may answer some calls with errors). */
async function attempt(label, what) {
  try {
    return await what();
  } catch (error) {
    say(`${label}: ${error?.message ?? error}`);
    return undefined;
  }
}

await client.connect(new StreamableHTTPClientTransport(new URL(url)));
say(`connected at ${client.getNegotiatedProtocolVersion()}`);
const capabilities = client.getServerCapabilities() ?? {};

// Tools are listed whatever the server declared (some mocks declare nothing).
const tools = (await attempt('tools/list', () => client.listTools()))?.tools ?? [];
if (scenario === 'json-schema-2020-12-preservation') {
  const focal = tools.find((t) => t.name === 'json_schema_2020_12_tool');
  await attempt('echo', () => client.callTool({ name: 'json_schema_echo', arguments: { schema: focal?.inputSchema } }));
} else {
  const calls = context.toolCalls ?? tools.map((t) => ({ name: t.name, arguments: argumentsFor(t.inputSchema) }));
  for (const call of calls) await attempt(`tools/call ${call.name}`, () => client.callTool(call));
}
if (capabilities.resources) {
  const [first] = (await attempt('resources/list', () => client.listResources()))?.resources ?? [];
  if (first) await attempt('resources/read', () => client.readResource({ uri: first.uri }));
}
if (capabilities.prompts) {
  const [first] = (await attempt('prompts/list', () => client.listPrompts()))?.prompts ?? [];
  const args = Object.fromEntries((first?.arguments ?? []).filter((a) => a.required).map((a) => [a.name, 'test']));
  if (first) await attempt('prompts/get', () => client.getPrompt({ name: first.name, arguments: args }));
}
await client.close();
