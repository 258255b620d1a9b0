// A reference fixture for the MCP conformance suite on the official TypeScript SDK v2
// (@modelcontextprotocol/server 2.4.0): one McpServer factory with the tools, resources and
// prompts the suite's server scenarios call by name, for both eras (2025-11-25 and 2026-07-28).
// reference-server.mjs serves it over streamable HTTP and stdio.
//
// Written for ahp-proxy from what the suite itself says and checks (the scenario descriptions
// and checks of @modelcontextprotocol/conformance 0.2.0-alpha.12, as installed from npm) and from
// the project's own Rust fixture (example-servers/conformance.rs), whose texts and payloads it
// reuses.
//
// Every tool that needs the client's input is written once, in the 2026-07-28 style: it returns
// `inputRequired(...)` until the retry carries the answers. On a 2026-07-28 request the client
// answers and retries; on a 2025-11-25 connection the SDK's legacy shim sends the embedded
// requests as real server->client requests and re-enters the tool with the answers.
import { randomBytes } from 'node:crypto';
import {
  McpServer,
  ResourceTemplate,
  completable,
  createRequestStateCodec,
  fromJsonSchema,
  inputRequired,
} from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

export const NAME = 'ahp-proxy-sdk-reference';

/** A 1×1 red PNG. */
const IMAGE = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
/** A minimal WAV file. */
const AUDIO = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';
/** The pause between the log or progress messages of one call (the suite wants them spread). */
const STEP_MS = 50;
const CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';

/**
 * Integrity protection of `requestState` (HMAC, the SDK's codec): one key per process, which
 * serves every round of a flow (HTTP requests of any era, or the one stdio connection). The
 * SDK checks every echoed state before the handler runs and answers a forged one with -32602.
 */
const stateCodec = createRequestStateCodec({ key: randomBytes(32), ttlSeconds: 600 });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const noArguments = z.object({});

/** The answer to the input request `key` on this round (an object), or undefined. */
function answer(ctx, key) {
  const value = ctx.mcpReq.inputResponses?.[key];
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : undefined;
}

/** The capabilities the client declared: per request (2026-07-28), or at `initialize`. */
function clientCapabilities(server, ctx) {
  return ctx.mcpReq.envelope?.[CAPABILITIES_KEY] ?? server.server.getClientCapabilities() ?? {};
}

const askName = (message) =>
  inputRequired.elicit({
    message,
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
  });
const askConfirmation = () =>
  inputRequired.elicit({
    message: 'Please confirm',
    requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
  });
const askCompletion = (prompt, maxTokens) =>
  inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens });
const sampledText = (result) => result?.content?.text ?? 'No response';
const rootList = (result) => (result.roots ?? []).map((r) => r.uri).join(', ');

/**
 * A handler (of a tool, or of a prompt) that asks for one input, `ask(args)` under `key`, until a
 * round carries its answer, then returns `done(answer)`. The SDK passes the context last (a
 * handler without arguments gets only the context).
 */
const askFor =
  (key, ask, done) =>
  async (...params) => {
    const ctx = params.at(-1);
    const got = answer(ctx, key);
    if (!got) return inputRequired({ inputRequests: { [key]: ask(params.length > 1 ? params[0] : {}) } });
    return done(got);
  };

/** A handler that asks for a confirmation with a signed requestState; `done(answer)` once both
 *  came back (a forged state never reaches it: the SDK answers -32602 first). */
const confirmWithState = (done) => async (_args, ctx) => {
  const got = answer(ctx, 'confirm');
  if (!got || ctx.mcpReq.requestState()?.step !== 'confirm') {
    const requestState = await stateCodec.mint({ step: 'confirm' });
    return inputRequired({ inputRequests: { confirm: askConfirmation() }, requestState });
  }
  return done(got);
};

/** The five enum shapes of SEP-1330 (as the Rust fixture). */
function enumSchema() {
  const titled = (labels) => ['value1', 'value2', 'value3'].map((value, i) => ({ const: value, title: labels[i] }));
  return {
    type: 'object',
    properties: {
      untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
      titledSingle: {
        type: 'string',
        description: 'Select one option with titles',
        oneOf: titled(['First Option', 'Second Option', 'Third Option']),
      },
      legacyEnum: {
        type: 'string',
        description: 'Select one option (legacy)',
        enum: ['opt1', 'opt2', 'opt3'],
        enumNames: ['Option One', 'Option Two', 'Option Three'],
      },
      untitledMulti: {
        type: 'array',
        description: 'Select multiple options',
        minItems: 1,
        maxItems: 3,
        items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
      },
      titledMulti: {
        type: 'array',
        description: 'Select multiple options with titles',
        minItems: 1,
        maxItems: 3,
        items: { anyOf: titled(['First Choice', 'Second Choice', 'Third Choice']) },
      },
    },
    required: [],
  };
}

const USER_SCHEMA = {
  type: 'object',
  properties: {
    username: { type: 'string', description: "User's response" },
    email: { type: 'string', description: "User's email address" },
  },
  required: ['username', 'email'],
};

const DEFAULTS_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'User name', default: 'John Doe' },
    age: { type: 'integer', description: 'User age', default: 30 },
    score: { type: 'number', description: 'User score', default: 95.5 },
    status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', description: 'Verification status', default: true },
  },
  required: [],
};

/** A schema with the JSON Schema 2020-12 vocabulary a proxy must keep (as the Rust fixture). */
const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      $anchor: 'addressDef',
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
    },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};

/**
 * A new fixture instance. `changed(kind)` ('tools' or 'prompts') is called by the trigger tools;
 * the caller delivers the list-changed notifications (it knows the connections and listen
 * streams).
 */
export function referenceServer({ changed }) {
  const server = new McpServer(
    { name: NAME, version: '2.4.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
      instructions: 'ahp-proxy: the MCP conformance suite reference fixture on the TypeScript SDK v2',
      requestState: { verify: stateCodec.verify },
    },
  );
  const tool = (name, description, handler, inputSchema = noArguments) =>
    server.registerTool(name, { description, inputSchema }, handler);

  // ---- content ----
  tool('test_simple_text', 'Tests simple text content response', async () => text('This is a simple text response for testing.'));
  tool('test_image_content', 'Tests image content response', async () => ({
    content: [{ type: 'image', data: IMAGE, mimeType: 'image/png' }],
  }));
  tool('test_audio_content', 'Tests audio content response', async () => ({
    content: [{ type: 'audio', data: AUDIO, mimeType: 'audio/wav' }],
  }));
  tool('test_embedded_resource', 'Tests embedded resource content response', async () => ({
    content: [
      {
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
      },
    ],
  }));
  tool('test_multiple_content_types', 'Tests response with multiple content types (text, image, resource)', async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: IMAGE, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: {
          uri: 'test://mixed-content-resource',
          mimeType: 'application/json',
          text: JSON.stringify({ test: 'data', value: 123 }),
        },
      },
    ],
  }));
  tool('test_error_handling', 'Tests error response handling', async () => ({
    content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }],
    isError: true,
  }));
  tool(
    'json_schema_2020_12_tool',
    'Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)',
    async (args) => text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args ?? {})}`),
    fromJsonSchema(JSON_SCHEMA_2020_12),
  );
  tool(
    'test_custom_header',
    'Echoes a parameter the client also sends as the Mcp-Param-Region header (SEP-2243)',
    async ({ region }) => text(`region: ${region}`),
    z.object({ region: z.string().meta({ 'x-mcp-header': 'Region' }) }),
  );

  // ---- notifications on the call's own stream ----
  // Log messages at info: the SDK sends them only when the client asked for logs
  // (2025-11-25: logging/setLevel; 2026-07-28: the request's logLevel).
  const logSteps = async (_args, ctx) => {
    for (const [i, step] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
      if (i > 0) await sleep(STEP_MS);
      await ctx.mcpReq.log('info', step, 'conformance-test-server');
    }
    return text('Tool with logging executed successfully');
  };
  tool('test_tool_with_logging', 'Tests tool that emits log messages during execution', logSteps);
  tool('test_logging_tool', 'Emits log messages only when the request set a log level (2026-07-28)', logSteps);
  tool('test_tool_with_progress', 'Tests tool that reports progress notifications', async (_args, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    for (const [i, progress] of [0, 50, 100].entries()) {
      if (i > 0) await sleep(STEP_MS);
      if (progressToken === undefined) continue;
      const params = { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` };
      await ctx.mcpReq.notify({ method: 'notifications/progress', params });
    }
    return text(progressToken === undefined ? 'Progress tool executed (no progress token)' : String(progressToken));
  });
  tool(
    'test_reconnection',
    'Tests SSE stream disconnection and client reconnection (SEP-1699): the server closes the stream mid-call and sends the result after the client reconnects',
    async (_args, ctx) => {
      ctx.http?.closeSSE?.();
      await sleep(100);
      return text(
        'Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.',
      );
    },
  );
  tool('test_trigger_tool_change', 'Sends notifications/tools/list_changed (on listen streams, and to legacy sessions)', async () => {
    changed('tools');
    return text('tools/list_changed sent');
  });
  tool('test_trigger_prompt_change', 'Sends notifications/prompts/list_changed (on listen streams, and to legacy sessions)', async () => {
    changed('prompts');
    return text('prompts/list_changed sent');
  });

  // ---- input from the client: sampling, elicitation, roots ----
  const llmAnswered = (got) => text(`LLM response: ${sampledText(got)}`);
  tool(
    'test_sampling',
    'Tests server-initiated sampling (LLM completion request)',
    askFor('completion', ({ prompt }) => askCompletion(prompt, 100), llmAnswered),
    z.object({ prompt: z.string().describe('The prompt to send to the LLM') }),
  );
  const formAnswered = (label) => (got) => text(`${label}: action=${got.action}, content=${JSON.stringify(got.content ?? {})}`);
  tool(
    'test_elicitation',
    'Tests server-initiated elicitation (user input request)',
    askFor('form', ({ message }) => inputRequired.elicit({ message, requestedSchema: USER_SCHEMA }), formAnswered('User response')),
    z.object({ message: z.string().describe('The message to show the user') }),
  );
  tool(
    'test_elicitation_sep1034_defaults',
    'Tests elicitation with default values per SEP-1034',
    askFor(
      'form',
      () => inputRequired.elicit({ message: 'Please review and update the form fields with defaults', requestedSchema: DEFAULTS_SCHEMA }),
      formAnswered('Elicitation completed'),
    ),
  );
  tool(
    'test_elicitation_sep1330_enums',
    'Tests elicitation with enum schema improvements per SEP-1330',
    askFor(
      'form',
      () => inputRequired.elicit({ message: 'Please select options from the enum fields', requestedSchema: enumSchema() }),
      formAnswered('Elicitation completed'),
    ),
  );
  tool(
    'test_missing_capability',
    'Needs the sampling capability: without it the request fails with -32021',
    askFor('completion', () => askCompletion('Say something.', 20), llmAnswered),
  );
  const greet = askFor('user_name', () => askName('What is your name?'), (got) => text(`Hello, ${got.content?.name ?? 'nobody'}!`));
  tool('test_streaming_elicitation', 'Asks for a form while the call is open (2026-07-28: an input_required result, never a request)', greet);

  // ---- multi-round-trip (SEP-2322) ----
  tool('test_input_required_result_elicitation', 'Asks for a name (input_required), then greets', greet);
  tool(
    'test_input_required_result_sampling',
    'Asks for a completion (input_required), then answers with it',
    askFor(
      'capital_question',
      () => askCompletion('What is the capital of France?', 100),
      (got) => text(`Sampling response: ${sampledText(got)}`),
    ),
  );
  tool(
    'test_input_required_result_list_roots',
    "Asks for the client's roots (input_required), then lists them",
    askFor('client_roots', () => inputRequired.listRoots(), (got) => text(`Roots: ${rootList(got)}`)),
  );
  tool(
    'test_input_required_result_request_state',
    'Asks for a confirmation with a signed requestState, then checks it',
    confirmWithState((got) => text(`state-ok: confirmed=${got.content?.ok === true}`)),
  );
  tool(
    'test_input_required_result_tampered_state',
    'Asks for a confirmation with a signed requestState; a forged one gets -32602',
    confirmWithState(() => text('state-ok')),
  );
  tool('test_input_required_result_multiple_inputs', 'Asks for a form, a completion and the roots at once', async (_args, ctx) => {
    const [name, greeting, roots] = ['user_name', 'greeting', 'client_roots'].map((key) => answer(ctx, key));
    if (!name || !greeting || !roots || ctx.mcpReq.requestState()?.step !== 'all') {
      const inputRequests = {
        user_name: askName('What is your name?'),
        greeting: askCompletion('Generate a greeting', 50),
        client_roots: inputRequired.listRoots(),
      };
      return inputRequired({ inputRequests, requestState: await stateCodec.mint({ step: 'all' }) });
    }
    return text(`name: ${name.content?.name}, greeting: ${sampledText(greeting)}, roots: ${rootList(roots)}`);
  });
  tool('test_input_required_result_multi_round', 'Two rounds of questions, each with its own requestState', async (_args, ctx) => {
    const state = ctx.mcpReq.requestState();
    const step1 = answer(ctx, 'step1');
    const step2 = answer(ctx, 'step2');
    if (state?.round === 2 && step2) {
      return text(`name: ${state.name}, favorite color: ${step2.content?.color}`);
    }
    if (state?.round === 2 || (state?.round === 1 && step1)) {
      const name = state.name ?? step1?.content?.name;
      const ask = inputRequired.elicit({
        message: 'Step 2: What is your favorite color?',
        requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
      });
      return inputRequired({ inputRequests: { step2: ask }, requestState: await stateCodec.mint({ round: 2, name }) });
    }
    const requestState = await stateCodec.mint({ round: 1 });
    return inputRequired({ inputRequests: { step1: askName('Step 1: What is your name?') }, requestState });
  });
  tool('test_input_required_result_capabilities', 'Asks only for what the client declared (elicitation, sampling, roots)', async (_args, ctx) => {
    const declared = clientCapabilities(server, ctx);
    const wanted = {
      ...(declared.elicitation ? { user_name: askName('What is your name?') } : {}),
      ...(declared.sampling ? { greeting: askCompletion('Generate a greeting', 50) } : {}),
      ...(declared.roots ? { client_roots: inputRequired.listRoots() } : {}),
    };
    const missing = Object.fromEntries(Object.entries(wanted).filter(([key]) => !answer(ctx, key)));
    if (Object.keys(missing).length > 0) return inputRequired({ inputRequests: missing });
    return text(`answered: ${Object.keys(wanted).join(', ') || 'nothing (no input capability declared)'}`);
  });

  // ---- resources ----
  const resource = (name, uri, title, description, mimeType, contents) =>
    server.registerResource(name, uri, { title, description, mimeType }, async () => ({ contents: [{ uri, mimeType, ...contents }] }));
  resource('static-text', 'test://static-text', 'Static Text Resource', 'A static text resource for testing', 'text/plain', {
    text: 'This is the content of the static text resource.',
  });
  resource('static-binary', 'test://static-binary', 'Static Binary Resource', 'A static binary resource (image) for testing', 'image/png', {
    blob: IMAGE,
  });
  resource('watched-resource', 'test://watched-resource', 'Watched Resource', 'A resource that can be subscribed to', 'text/plain', {
    text: 'Watched resource content',
  });
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { title: 'Resource Template', description: 'A resource template with parameter substitution', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
        },
      ],
    }),
  );
  // Subscriptions (2025-11-25 only: 2026-07-28 has subscriptions/listen instead) are accepted;
  // nothing here changes a resource.
  server.server.setRequestHandler('resources/subscribe', async () => ({}));
  server.server.setRequestHandler('resources/unsubscribe', async () => ({}));

  // ---- prompts ----
  const say = (t) => ({ role: 'user', content: { type: 'text', text: t } });
  server.registerPrompt('test_simple_prompt', { title: 'Simple Test Prompt', description: 'A simple prompt without arguments' }, async () => ({
    messages: [say('This is a simple prompt for testing.')],
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      title: 'Prompt With Arguments',
      description: 'A prompt with required arguments',
      argsSchema: z.object({
        arg1: completable(z.string().describe('First test argument'), (value) =>
          ['paris', 'park', 'party'].filter((v) => v.startsWith(value ?? '')),
        ),
        arg2: z.string().describe('Second test argument'),
      }),
    },
    async ({ arg1, arg2 }) => ({ messages: [say(`Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`)] }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      title: 'Prompt With Embedded Resource',
      description: 'A prompt that includes an embedded resource',
      argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') }),
    },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } },
        },
        say('Please process the embedded resource above.'),
      ],
    }),
  );
  server.registerPrompt('test_prompt_with_image', { title: 'Prompt With Image', description: 'A prompt that includes image content' }, async () => ({
    messages: [{ role: 'user', content: { type: 'image', data: IMAGE, mimeType: 'image/png' } }, say('Please analyze the image above.')],
  }));
  server.registerPrompt(
    'test_input_required_result_prompt',
    { title: 'Prompt Needing Input', description: 'Asks for the context to use (input_required), then builds the prompt' },
    askFor(
      'user_context',
      () =>
        inputRequired.elicit({
          message: 'What context should the prompt use?',
          requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] },
        }),
      (got) => ({ messages: [say(`Use this context: ${got.content?.context ?? ''}`)] }),
    ),
  );
  return server;
}
