// The console's mirror of AHP state: the official reducers (the `ahp` crate's
// `reducers.rs`, itself a port of the spec's `reducers.ts`) ported for the actions this
// host sends, on plain JSON. Each returns "applied", "noop" or "unknown"; an unknown action
// makes the console take a fresh snapshot instead of guessing. tests/console.rs compares a
// mirror kept this way with a fresh snapshot.

const IDLE = 1, ERROR = 2, IN_PROGRESS = 8, INPUT_NEEDED = 24, IS_READ = 32, IS_ARCHIVED = 64;
const ACTIVITY_MASK = (1 << 5) - 1;

/** Drop keys whose value is undefined (serde's skip_serializing_if = is_none). */
function clean(object) {
  for (const key of Object.keys(object)) {
    if (object[key] === undefined) delete object[key];
  }
  return object;
}

const or = (value, fallback) => (value === undefined || value === null ? fallback : value);

/** Replace the entry `same` finds, or append `value`. */
function upsert(list, same, value) {
  const i = list.findIndex(same);
  if (i >= 0) list[i] = value;
  else list.push(value);
}

/** Remove the entry `same` finds; whether there was one. */
function removeFrom(list, same) {
  const i = list.findIndex(same);
  if (i >= 0) list.splice(i, 1);
  return i >= 0;
}

function withFlag(status, flag, set) {
  return set ? status | flag : status & ~flag;
}

/** `…/isReadChanged` and `…/isArchivedChanged`, on a session or a chat. */
function applyFlag(target, action) {
  target.status = "isRead" in action
    ? withFlag(target.status, IS_READ, action.isRead)
    : withFlag(target.status, IS_ARCHIVED, action.isArchived);
  return "applied";
}

// ─── root ───────────────────────────────────────────────────────────────────

export function applyRoot(state, action) {
  switch (action.type) {
    case "root/agentsChanged":
      state.agents = action.agents;
      return "applied";
    case "root/activeSessionsChanged":
      state.activeSessions = action.activeSessions;
      return "applied";
    case "root/terminalsChanged":
      state.terminals = action.terminals;
      return "applied";
    case "root/configChanged":
      if (!state.config) return "noop";
      state.config.values = action.replace ? action.config : { ...state.config.values, ...action.config };
      return "applied";
    default:
      return "unknown";
  }
}

// ─── session ────────────────────────────────────────────────────────────────

const CONTAINERS = new Set(["plugin", "directory", "mcpServer"]);
const CHILDREN = new Set(["agent", "skill", "prompt", "rule", "hook", "mcpServer"]);

const containerId = (c) => (CONTAINERS.has(c.type) ? c.id : undefined);
const childId = (c) => (CHILDREN.has(c.type) ? c.id : undefined);
const childrenOf = (c) => ((c.type === "plugin" || c.type === "directory") && Array.isArray(c.children) ? c.children : undefined);

function effectiveEnablement(enablement) {
  const first = enablement[0];
  if (!first) return true;
  if (["global", "workspace", "session"].includes(first.kind)) return !!first.enabled;
  return false;
}

function applyContainerEnablement(c, enablement) {
  const provenance = enablement.length ? enablement : undefined;
  if (c.type === "directory") c.enabled = effectiveEnablement(enablement);
  else if (c.type === "plugin" || c.type === "mcpServer") {
    c.enablement = provenance;
    clean(c);
  }
}

function applyChildEnablement(c, enablement) {
  if (c.type === "mcpServer") {
    c.enablement = enablement.length ? enablement : undefined;
    clean(c);
  } else if (CHILDREN.has(c.type)) {
    c.enabled = effectiveEnablement(enablement);
  }
}

/** The MCP server customization `id` (top level or a child), or undefined. */
export function findServer(session, id) {
  const list = session.customizations;
  if (!list) return undefined;
  const top = list.find((c) => containerId(c) === id);
  if (top) return top.type === "mcpServer" ? top : undefined;
  for (const container of list) {
    const child = (childrenOf(container) || []).find((c) => childId(c) === id);
    if (child) return child.type === "mcpServer" ? child : undefined;
  }
  return undefined;
}

function setServerState(session, id, state, channel) {
  const server = findServer(session, id);
  if (!server) return "noop";
  server.state = state;
  server.channel = channel;
  clean(server);
  return "applied";
}

const inputId = (r) => (r && typeof r.id === "string" ? r.id : undefined);
const awaitsUser = (r) => r.kind !== "toolClientExecution";

function withInputNeeded(status, list) {
  if (list.some(awaitsUser)) return (status & ~ACTIVITY_MASK) | INPUT_NEEDED;
  return status & ~(INPUT_NEEDED & ~IN_PROGRESS);
}

export function applySession(state, action) {
  switch (action.type) {
    case "session/ready":
      state.lifecycle = "ready";
      return "applied";
    case "session/chatAdded":
      upsert(state.chats, (c) => c.resource === action.summary.resource, action.summary);
      return "applied";
    case "session/chatRemoved":
      if (!removeFrom(state.chats, (c) => c.resource === action.chat)) return "noop";
      if (state.defaultChat === action.chat) delete state.defaultChat;
      return "applied";
    case "session/chatUpdated": {
      const chat = state.chats.find((c) => c.resource === action.chat);
      if (!chat) return "noop";
      for (const key of ["title", "status", "activity", "modifiedAt", "changes", "origin", "workingDirectories"]) {
        if (action.changes[key] !== undefined && action.changes[key] !== null) chat[key] = action.changes[key];
      }
      return "applied";
    }
    case "session/defaultChatChanged":
      state.defaultChat = action.defaultChat;
      clean(state);
      return "applied";
    case "session/titleChanged":
      state.title = action.title;
      return "applied";
    case "session/isReadChanged":
    case "session/isArchivedChanged":
      return applyFlag(state, action);
    case "session/activeClientSet":
      upsert(state.activeClients, (c) => c.clientId === action.activeClient.clientId, action.activeClient);
      return "applied";
    case "session/activeClientRemoved":
      return removeFrom(state.activeClients, (c) => c.clientId === action.clientId) ? "applied" : "noop";
    case "session/inputNeededSet": {
      const id = inputId(action.request);
      if (id === undefined) return "noop";
      const list = (state.inputNeeded ||= []);
      upsert(list, (r) => inputId(r) === id, action.request);
      state.status = withInputNeeded(state.status, list);
      return "applied";
    }
    case "session/inputNeededRemoved": {
      const list = state.inputNeeded;
      if (!list || !removeFrom(list, (r) => inputId(r) === action.id)) return "noop";
      if (!list.length) delete state.inputNeeded;
      state.status = withInputNeeded(state.status, state.inputNeeded || []);
      return "applied";
    }
    case "session/customizationsChanged":
      state.customizations = action.customizations;
      return "applied";
    case "session/customizationToggled": {
      const list = state.customizations;
      if (!list) return "noop";
      const top = list.find((c) => containerId(c) === action.id);
      if (top) {
        applyContainerEnablement(top, action.enablement);
        return "applied";
      }
      for (const container of list) {
        const child = (childrenOf(container) || []).find((c) => childId(c) === action.id);
        if (child) {
          applyChildEnablement(child, action.enablement);
          return "applied";
        }
      }
      return "noop";
    }
    case "session/customizationUpdated": {
      const list = (state.customizations ||= []);
      const id = containerId(action.customization);
      if (id === undefined) return "noop";
      upsert(list, (c) => containerId(c) === id, action.customization);
      return "applied";
    }
    case "session/customizationRemoved": {
      const list = state.customizations;
      if (!list) return "noop";
      if (removeFrom(list, (c) => containerId(c) === action.id)) return "applied";
      for (const container of list) {
        const children = childrenOf(container);
        if (children && removeFrom(children, (c) => childId(c) === action.id)) return "applied";
      }
      return "noop";
    }
    case "session/mcpServerStateChanged":
      return setServerState(state, action.id, action.state, action.channel);
    case "session/mcpServerStartRequested":
      return setServerState(state, action.id, { kind: "starting" }, undefined);
    case "session/mcpServerStopRequested":
      return setServerState(state, action.id, { kind: "stopped" }, undefined);
    case "session/mcpServerBackgroundRequested": {
      const server = findServer(state, action.id);
      if (!server || server.state.kind !== "starting" || server.state.blocking !== true) return "noop";
      server.state.blocking = false;
      return "applied";
    }
    default:
      return "unknown";
  }
}

// ─── chat ───────────────────────────────────────────────────────────────────

/** The fields every tool call state carries (`tool_call_meta`). */
function base(tc) {
  return {
    toolCallId: tc.toolCallId,
    toolName: tc.toolName,
    displayName: tc.displayName,
    intention: tc.intention,
    toolInput: tc.status === "streaming" ? undefined : tc.toolInput,
    contributor: tc.contributor,
    _meta: tc._meta,
  };
}

function refineContributor(current, next) {
  if (next === undefined || next === null) return current;
  if (current && current.kind === "client") {
    return next.kind === "client" && next.clientId === current.clientId ? next : current;
  }
  if (next.kind === "client") return current;
  return next;
}

function hasBlockingToolCall(chat) {
  return !!chat.activeTurn && chat.activeTurn.responseParts.some(
    (p) => p.kind === "toolCall" && ["pending-confirmation", "pending-result-confirmation", "auth-required"].includes(p.toolCall.status),
  );
}

function hasOpenInputRequest(chat) {
  return !!chat.activeTurn && chat.activeTurn.responseParts.some((p) => p.kind === "inputRequest" && p.response == null);
}

function summaryStatus(chat, terminal) {
  let activity;
  if (terminal !== undefined) activity = terminal;
  else if (hasOpenInputRequest(chat) || hasBlockingToolCall(chat)) activity = INPUT_NEEDED;
  else if (chat.activeTurn) activity = IN_PROGRESS;
  else activity = IDLE;
  return (chat.status & ~ACTIVITY_MASK) | activity;
}

function updateToolCall(chat, turnId, toolCallId, update) {
  const active = chat.activeTurn;
  if (!active || active.id !== turnId) return "noop";
  for (const part of active.responseParts) {
    if (part.kind === "toolCall" && part.toolCall.toolCallId === toolCallId) {
      part.toolCall = clean(update(part.toolCall));
      return "applied";
    }
  }
  return "noop";
}

/** `started + duration ms` as jiff prints it with millisecond precision (truncated). */
function addMilliseconds(started, duration) {
  const match = /^(.*T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(started);
  const ms = Date.parse(match ? `${match[1]}${match[2] ? match[2].slice(0, 4) : ""}${match[3]}` : started);
  if (Number.isNaN(ms)) return undefined;
  return new Date(ms + duration).toISOString();
}

function endTurn(chat, turnId, duration, turnState, terminal, errorPart) {
  const active = chat.activeTurn;
  if (!active || active.id !== turnId) return "noop";
  duration = Math.max(0, duration);
  const modifiedAt = addMilliseconds(active.startedAt, duration);
  if (modifiedAt === undefined) return "noop";
  delete chat.activeTurn;
  const responseParts = active.responseParts.map((part) => {
    if (part.kind !== "toolCall" || ["completed", "cancelled"].includes(part.toolCall.status)) return part;
    const tc = part.toolCall;
    return {
      ...part,
      toolCall: clean({
        status: "cancelled",
        ...base(tc),
        invocationMessage: or(tc.invocationMessage, ""),
        reason: "skipped",
      }),
    };
  });
  if (errorPart) responseParts.push(errorPart);
  chat.turns.push(clean({
    id: active.id,
    startedAt: active.startedAt,
    duration,
    message: active.message,
    responseParts,
    usage: active.usage,
    state: turnState,
  }));
  chat.modifiedAt = modifiedAt;
  chat.status = summaryStatus(chat, terminal);
  return "applied";
}

function toolCallReady(tc, a) {
  if (!["streaming", "running", "pending-confirmation"].includes(tc.status)) return tc;
  const b = base(tc);
  const common = {
    ...b,
    intention: or(a.intention, b.intention),
    toolInput: or(a.toolInput, b.toolInput),
    contributor: refineContributor(b.contributor, a.contributor),
    _meta: or(a._meta, b._meta),
    invocationMessage: a.invocationMessage,
  };
  if (a.confirmed !== undefined && a.confirmed !== null) {
    return { status: "running", ...common, confirmed: a.confirmed };
  }
  const pending = tc.status === "pending-confirmation" ? tc : {};
  return {
    status: "pending-confirmation",
    ...common,
    confirmationTitle: or(a.confirmationTitle, pending.confirmationTitle),
    riskAssessment: or(a.riskAssessment, pending.riskAssessment),
    edits: or(a.edits, pending.edits),
    editable: or(a.editable, pending.editable),
    options: or(a.options, pending.options),
  };
}

function toolCallComplete(tc, a) {
  const b = base(tc);
  let carried;
  if (tc.status === "running") {
    carried = { invocationMessage: tc.invocationMessage, toolInput: tc.toolInput, confirmed: tc.confirmed, selectedOption: tc.selectedOption, content: undefined, fromAuth: false };
  } else if (tc.status === "pending-confirmation") {
    carried = { invocationMessage: tc.invocationMessage, toolInput: tc.toolInput, confirmed: "not-needed", selectedOption: undefined, content: undefined, fromAuth: false };
  } else if (tc.status === "auth-required") {
    if (a.result.success) return tc;
    carried = { invocationMessage: tc.invocationMessage, toolInput: tc.toolInput, confirmed: tc.confirmed, selectedOption: tc.selectedOption, content: tc.content, fromAuth: true };
  } else {
    return tc;
  }
  const pendingResult = a.requiresResultConfirmation && !carried.fromAuth;
  return {
    status: pendingResult ? "pending-result-confirmation" : "completed",
    ...b,
    toolInput: carried.toolInput,
    _meta: or(a._meta, b._meta),
    invocationMessage: carried.invocationMessage,
    success: a.result.success,
    pastTenseMessage: a.result.pastTenseMessage,
    content: or(a.result.content, carried.content),
    structuredContent: a.result.structuredContent,
    error: a.result.error,
    confirmed: carried.confirmed,
    selectedOption: carried.selectedOption,
  };
}

function toolCallAuthRequired(tc, a) {
  if (tc.status !== "running" || !tc.contributor || tc.contributor.kind !== "mcp") return tc;
  const b = base(tc);
  return {
    ...b,
    status: "auth-required",
    toolInput: tc.toolInput,
    contributor: tc.contributor,
    _meta: or(a._meta, b._meta),
    invocationMessage: tc.invocationMessage,
    confirmed: tc.confirmed,
    selectedOption: tc.selectedOption,
    auth: a.auth,
    content: tc.content,
  };
}

function toolCallAuthResolved(tc, a) {
  if (tc.status !== "auth-required") return tc;
  const b = base(tc);
  return {
    status: "running",
    ...b,
    toolInput: tc.toolInput,
    contributor: tc.contributor,
    _meta: or(a._meta, b._meta),
    invocationMessage: tc.invocationMessage,
    confirmed: tc.confirmed,
    selectedOption: tc.selectedOption,
    content: tc.content,
  };
}

function refreshed(chat, outcome) {
  if (outcome === "applied") chat.status = summaryStatus(chat);
  return outcome;
}

export function applyChat(chat, action) {
  switch (action.type) {
    case "chat/turnStarted":
      chat.activeTurn = clean({ id: action.turnId, startedAt: action.startedAt, message: action.message, responseParts: [] });
      chat.status = summaryStatus(chat);
      chat.modifiedAt = action.startedAt;
      chat.status = withFlag(chat.status, IS_READ, false);
      if (action.queuedMessageId) {
        if (chat.steeringMessage && chat.steeringMessage.id === action.queuedMessageId) delete chat.steeringMessage;
        if (chat.queuedMessages) {
          chat.queuedMessages = chat.queuedMessages.filter((m) => m.id !== action.queuedMessageId);
          if (!chat.queuedMessages.length) delete chat.queuedMessages;
        }
      }
      return "applied";
    case "chat/responsePart": {
      const active = chat.activeTurn;
      if (!active || active.id !== action.turnId || action.part.kind === "error") return "noop";
      active.responseParts.push(action.part);
      return "applied";
    }
    case "chat/toolCallStart": {
      const active = chat.activeTurn;
      if (!active || active.id !== action.turnId) return "noop";
      active.responseParts.push({
        kind: "toolCall",
        toolCall: clean({
          status: "streaming",
          toolCallId: action.toolCallId,
          toolName: action.toolName,
          displayName: action.displayName,
          intention: action.intention,
          contributor: action.contributor,
          _meta: action._meta,
        }),
      });
      return "applied";
    }
    case "chat/toolCallReady":
      return refreshed(chat, updateToolCall(chat, action.turnId, action.toolCallId, (tc) => toolCallReady(tc, action)));
    case "chat/toolCallComplete":
      return refreshed(chat, updateToolCall(chat, action.turnId, action.toolCallId, (tc) => toolCallComplete(tc, action)));
    case "chat/toolCallAuthRequired":
      return refreshed(chat, updateToolCall(chat, action.turnId, action.toolCallId, (tc) => toolCallAuthRequired(tc, action)));
    case "chat/toolCallAuthResolved":
      return refreshed(chat, updateToolCall(chat, action.turnId, action.toolCallId, (tc) => toolCallAuthResolved(tc, action)));
    case "chat/turnComplete":
      return endTurn(chat, action.turnId, action.duration, "complete");
    case "chat/turnCancelled":
      return endTurn(chat, action.turnId, action.duration, "cancelled");
    case "chat/error":
      return endTurn(chat, action.turnId, action.duration, "error", ERROR, action.part);
    case "chat/truncated": {
      if (action.turnId === undefined || action.turnId === null) {
        chat.turns = [];
        delete chat.turnsNextCursor;
      } else {
        const i = chat.turns.findIndex((t) => t.id === action.turnId);
        if (i < 0) return "noop";
        chat.turns.length = i + 1;
      }
      delete chat.activeTurn;
      chat.status = summaryStatus(chat);
      return "applied";
    }
    case "chat/isReadChanged":
    case "chat/isArchivedChanged":
      return applyFlag(chat, action);
    default:
      return "unknown";
  }
}
