// The activity: the turns of `ahp-chat:/harness` and their tool calls, live — name, server,
// status, the host's timing, who made the call (a harness, this console, another AHP client),
// its arguments and result as formatted JSON. A call paused for authorization can be resumed
// (authenticate) or given up; a call whose tool has a View can open it. Calls are drawn once
// and redrawn only when they change, so what is expanded stays expanded.

import { h, fill, badge, jsonDetails, pretty, replaceKeepingFocus } from "./dom.js";

/** The `_meta` key the host stamps every call with (startedAt, durationMs, era, clientId). */
export const CALL_META = "ahp-proxy/call";

const STATUS_LABEL = {
  streaming: "starting",
  "pending-confirmation": "waiting",
  running: "running",
  "auth-required": "paused for authorization",
  "pending-result-confirmation": "waiting",
  completed: "done",
  cancelled: "cancelled",
};

/** A `StringOrMarkdown` (or anything) as text. */
export function text(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  if (typeof value.markdown === "string") return value.markdown;
  if (typeof value.value === "string") return value.value;
  return JSON.stringify(value);
}

/**
 * A one-line `StringOrMarkdown` as nodes: a Markdown value's code spans (`` `add_note` ``,
 * fenced by any run of backticks, CommonMark's one padding space each side taken off) become
 * `<code>`; everything else stays text, so nothing in it is read as HTML.
 */
export function inline(value) {
  if (!value || typeof value.markdown !== "string") return [text(value)];
  const source = value.markdown;
  const runs = /`+/g;
  const nodes = [];
  let plain = "";
  let at = 0;
  let opening;
  while ((opening = runs.exec(source))) {
    // The span ends at the next run of exactly as many backticks; without one, the opening
    // run is literal text.
    let closing;
    while ((closing = runs.exec(source)) && closing[0].length !== opening[0].length);
    if (!closing) {
      runs.lastIndex = opening.index + opening[0].length;
      continue;
    }
    plain += source.slice(at, opening.index);
    if (plain) nodes.push(plain);
    plain = "";
    let code = source.slice(opening.index + opening[0].length, closing.index);
    if (code.length > 1 && code.startsWith(" ") && code.endsWith(" ") && code.trim()) code = code.slice(1, -1);
    nodes.push(h("code", {}, code));
    at = closing.index + closing[0].length;
  }
  plain += source.slice(at);
  if (plain) nodes.push(plain);
  return nodes;
}

/** The text of a tool call's result contents. */
export function resultText(tc) {
  return (tc.content || [])
    .map((c) => (c.type === "text" ? c.text : c.type === "embeddedResource" ? `[${c.contentType || "resource"}]` : c.uri || `[${c.type}]`))
    .join("\n");
}

/** What the host says about a call: `{startedAt, durationMs, era, clientId}` (each may be absent). */
export function hostTiming(tc) {
  const own = tc && tc._meta && tc._meta[CALL_META];
  return own && typeof own === "object" ? own : {};
}

/** A call's result as JSON to read: content, structured content, error, as the chat has it. */
function resultJson(tc) {
  const out = { success: tc.success };
  for (const key of ["content", "structuredContent", "error", "pastTenseMessage"]) if (tc[key] !== undefined) out[key] = tc[key];
  return out;
}

/** The MCP era a harness spoke for a call, as the host names it in `era`. */
const ERA_LABEL = { legacy: "MCP 2025", modern: "MCP 2026-07-28" };
const ERA_TITLE = { legacy: "the harness spoke MCP 2025-11-25 or before (initialize, sessions)", modern: "the harness spoke MCP 2026-07-28 (stateless requests)" };

export class Activity {
  /**
   * @param element where the turns go
   * @param actions {server(customizationId) → {name}, giveUp(turnId, toolCallId),
   *                 authenticate(resource, token, scopes), openView(tc), clientId}
   */
  constructor(element, actions) {
    this.element = element;
    this.actions = actions;
    this.turns = new Map(); // turn id → {element, calls: Map toolCallId → {tc, element}}
  }

  /** Draw `chat`: new turns and changed calls only. */
  render(chat) {
    const turns = [...(chat.turns || [])];
    if (chat.activeTurn) turns.push({ ...chat.activeTurn, active: true });
    turns.reverse();
    const keep = new Set(turns.map((t) => t.id));
    for (const [id, entry] of this.turns) {
      if (!keep.has(id)) {
        entry.element.remove();
        this.turns.delete(id);
      }
    }
    if (!turns.length) {
      this.element.replaceChildren(h("p", { class: "empty" }, "No tool calls yet."));
      return;
    }
    this.element.querySelector(":scope > .empty")?.remove();
    let previous = null;
    for (const turn of turns) {
      const entry = this.turn(turn);
      const expected = previous ? previous.nextSibling : this.element.firstChild;
      if (entry.element !== expected) this.element.insertBefore(entry.element, expected);
      previous = entry.element;
    }
  }

  /** Turn `turn`'s element, brought up to date. */
  turn(turn) {
    let entry = this.turns.get(turn.id);
    if (!entry) {
      entry = { element: h("article", { class: "turn", "data-turn": turn.id }), head: null, calls: new Map(), list: h("div", { class: "calls" }) };
      entry.element.append(h("header", { class: "turn-head" }), entry.list);
      this.turns.set(turn.id, entry);
    }
    const state = turn.active ? "In progress" : `Turn ${turn.state || ""}`;
    const head = entry.element.firstChild;
    const headText = `${state}|${turn.startedAt}|${turn.duration}`;
    if (head.dataset.shown !== headText) {
      head.dataset.shown = headText;
      fill(head,
        h("span", {}, state),
        turn.startedAt ? h("time", { class: "muted", datetime: turn.startedAt }, new Date(turn.startedAt).toLocaleTimeString()) : null,
        typeof turn.duration === "number" ? h("span", { class: "muted" }, `${turn.duration} ms`) : null,
      );
    }
    let previous = null;
    for (const part of turn.responseParts || []) {
      let element;
      if (part.kind === "toolCall") {
        const tc = part.toolCall;
        const known = entry.calls.get(tc.toolCallId);
        if (known && known.tc === tc && known.turnId === turn.id) element = known.element;
        else {
          element = this.call(turn, tc);
          if (known && known.element.isConnected) replaceKeepingFocus(known.element, element);
          entry.calls.set(tc.toolCallId, { tc, element, turnId: turn.id });
        }
      } else if (part.kind === "markdown") {
        const key = part.id || part.content;
        element = entry.calls.get(key)?.element || h("p", { class: "muted" }, part.content);
        entry.calls.set(key, { element });
      } else continue;
      const expected = previous ? previous.nextSibling : entry.list.firstChild;
      if (element !== expected) entry.list.insertBefore(element, expected);
      previous = element;
    }
    return entry;
  }

  call(turn, tc) {
    const server = tc.contributor && tc.contributor.kind === "mcp" ? this.actions.server(tc.contributor.customizationId) : undefined;
    const timing = hostTiming(tc);
    const status = tc.status === "completed" ? (tc.success ? "done" : "failed") : STATUS_LABEL[tc.status] || tc.status;
    const statusKind = tc.status === "completed" ? (tc.success ? "ok" : "failed") : tc.status;
    const ui = tc._meta && tc._meta.ui;
    const result = tc.status === "completed" ? resultText(tc) : "";
    const by = timing.clientId === undefined ? null : timing.clientId === this.actions.clientId ? "from this console" : "from an AHP client";
    return h(
      "div",
      {
        class: `call call-${statusKind}`,
        "data-tool": tc.toolName,
        "data-status": tc.status,
        "data-call": tc.toolCallId,
        "data-by": timing.clientId === undefined ? "harness" : timing.clientId === this.actions.clientId ? "console" : "client",
        "data-era": timing.era,
      },
      h(
        "div",
        { class: "call-head" },
        h("strong", {}, tc.displayName || tc.toolName),
        tc.displayName && tc.displayName !== tc.toolName ? h("code", { class: "muted" }, tc.toolName) : null,
        server ? h("span", { class: "muted" }, `on ${server.name}`) : null,
        badge(status, `call-${statusKind}`),
        typeof timing.durationMs === "number" ? h("span", { class: "muted call-duration", title: "measured by the proxy" }, `${timing.durationMs} ms`) : null,
        by ? h("span", { class: "badge badge-by", title: `clientId ${timing.clientId}` }, by) : null,
        ERA_LABEL[timing.era] ? h("span", { class: "badge badge-era", title: ERA_TITLE[timing.era] }, ERA_LABEL[timing.era]) : null,
        ui && ui.resourceUri && server ? h("button", { type: "button", onclick: () => this.actions.openView(tc) }, "Open view") : null,
      ),
      timing.startedAt ? h("time", { class: "muted call-time", datetime: timing.startedAt }, new Date(timing.startedAt).toLocaleTimeString()) : null,
      tc.toolInput !== undefined ? h("details", { class: "call-input json" }, h("summary", {}, "Arguments"), h("pre", { class: "json-text" }, pretty(tc.toolInput))) : null,
      result ? h("pre", { class: "call-result" }, result) : null,
      tc.status === "completed" && !tc.success && tc.error ? h("pre", { class: "call-error" }, text(tc.error.message || tc.error)) : null,
      tc.status === "completed" && !tc.success && !tc.error && tc.pastTenseMessage ? h("div", { class: "call-error" }, text(tc.pastTenseMessage)) : null,
      tc.status === "completed" ? jsonDetails("Result as JSON", resultJson(tc), { class: "call-output json" }) : null,
      tc.status === "auth-required" ? this.paused(turn, tc) : null,
    );
  }

  paused(turn, tc) {
    const auth = tc.auth || {};
    const resource = (auth.resource && auth.resource.resource) || "";
    const scopes = auth.requiredScopes || [];
    const input = h("input", { type: "password", autocomplete: "off", placeholder: "paste a token to resume", "aria-label": `Token for ${resource}` });
    return h(
      "form",
      {
        class: "auth paused",
        onsubmit: (event) => {
          event.preventDefault();
          this.actions.authenticate(resource, input.value, scopes);
        },
      },
      h("div", {}, "Waiting for authorization of ", h("code", {}, resource || "its server")),
      scopes.length ? h("div", {}, "Scopes: ", h("code", {}, scopes.join(" "))) : null,
      auth.description ? h("div", { class: "muted" }, auth.description) : null,
      h("label", {}, input),
      h("button", { type: "submit" }, "Authenticate and resume"),
      h("button", { type: "button", class: "danger", onclick: () => this.actions.giveUp(turn.id, tc.toolCallId) }, "Give up"),
    );
  }
}
