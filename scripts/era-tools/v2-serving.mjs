// What the SDK v2 servers share (era-server.mjs, reference-server.mjs; @modelcontextprotocol/server
// 2.4.0 and /node 2.1.2): dual-era streamable HTTP, where each request is classified by era and
// 2026-07-28 requests go to a createMcpHandler handler (stateless) and 2025-11-25 ones to
// stateful sessions (NodeStreamableHTTPServerTransport: Mcp-Session-Id, a GET stream,
// server->client requests), the composition the SDK's own documentation gives for keeping
// sessionful legacy serving next to a strict modern endpoint (`createMcpHandler`'s `legacy`
// option and `isLegacyRequest`); an in-memory event store for those sessions; and the set of
// instances that have a connection of their own, which get list changes pushed to them.
import { randomUUID } from 'node:crypto';
import { classifyInboundRequest, isInitializeRequest, isJsonContentType } from '@modelcontextprotocol/server';
import { NodeStreamableHTTPServerTransport, toNodeHandler } from '@modelcontextprotocol/node';
import { jsonBody } from './common.mjs';

const first = (value) => [value].flat()[0];

function answerError(res, status, code, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

/**
 * A node `(req, res)` handler serving both eras on one endpoint.
 *
 * - `modern`: the handler of `createMcpHandler(factory, { legacy: 'reject' })` (modern requests
 *   only reach it);
 * - `legacyServer()`: a new McpServer for a new legacy session (on `initialize`); its
 *   `close()` is called when the session ends;
 * - `sessionOptions()`: extra options of a new session's transport (e.g. an event store).
 *
 * A legacy request naming an unknown session gets 404; one without a session that is not
 * `initialize` gets 400.
 */
export function dualEraHandler({ modern, legacyServer, sessionOptions = () => ({}), onerror }) {
  const modernNode = toNodeHandler(modern, { onerror });
  const sessions = new Map();
  return async (req, res) => {
    // What the SDK asks of a hand-wired composition: a POST that is not JSON gets 415 before
    // its body is read.
    if (req.method === 'POST' && !isJsonContentType(first(req.headers['content-type']))) {
      return answerError(res, 415, -32000, 'Unsupported Media Type: Content-Type must be application/json');
    }
    const body = await jsonBody(req, res);
    if (body === false) return;
    const inbound = classifyInboundRequest({
      httpMethod: req.method,
      protocolVersionHeader: first(req.headers['mcp-protocol-version']),
      mcpMethodHeader: first(req.headers['mcp-method']),
      body,
    });
    if (inbound.kind !== 'legacy') return modernNode(req, res, body);

    const sid = first(req.headers['mcp-session-id']);
    let transport = sid ? sessions.get(sid) : undefined;
    if (!transport && !sid && req.method === 'POST' && isInitializeRequest(body)) {
      const server = legacyServer();
      const created = new NodeStreamableHTTPServerTransport({
        ...sessionOptions(),
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, created),
      });
      created.onclose = () => {
        if (created.sessionId) sessions.delete(created.sessionId);
        server.close().catch(() => {});
      };
      await server.connect(created);
      transport = created;
    }
    if (!transport) {
      return sid
        ? answerError(res, 404, -32001, 'Session not found')
        : answerError(res, 400, -32000, 'Bad Request: Session ID required');
    }
    await transport.handleRequest(req, res, body);
  };
}

/**
 * The events of one legacy session's SSE streams, kept in memory so that a client can resume a
 * stream with `Last-Event-ID` (the SDK transport's `eventStore`; with it the transport sends a
 * priming event first). Forgotten with the session.
 */
export class MemoryEventStore {
  #events = new Map(); // event id -> { streamId, message }, in the order stored
  #next = 0;

  async storeEvent(streamId, message) {
    const id = `${++this.#next}`;
    this.#events.set(id, { streamId, message });
    return id;
  }

  async getStreamIdForEventId(eventId) {
    return this.#events.get(eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const last = this.#events.get(lastEventId);
    if (!last) throw new Error(`unknown event id ${lastEventId}`);
    let after = false;
    for (const [id, { streamId, message }] of this.#events) {
      if (after && streamId === last.streamId) await send(id, message);
      after ||= id === lastEventId;
    }
    return last.streamId;
  }
}

/** Keeps `entry` in the set `live` while the connection of `server` (an McpServer) lasts. */
export function whileConnected(live, server, entry = server) {
  live.add(entry);
  const onclose = server.server.onclose;
  server.server.onclose = () => {
    live.delete(entry);
    onclose?.();
  };
  return server;
}
