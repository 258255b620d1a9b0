// Harness activity: the turns of `ahp-chat:/harness` and their tool calls, live — name,
// server, arguments, status, duration, result or error. A call paused for authorization can
// be resumed (authenticate) or given up; a call whose tool has a View can open it.

import { h, fill, badge } from "./dom.js";

const STATUS_LABEL = {
  streaming: "starting",
  "pending-confirmation": "waiting",
  running: "running",
  "auth-required": "paused for authorization",
  "pending-result-confirmation": "waiting",
  completed: "done",
  cancelled: "cancelled",
};

function text(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  if (typeof value.markdown === "string") return value.markdown;
  if (typeof value.value === "string") return value.value;
  return JSON.stringify(value);
}

function prettyInput(input) {
  if (input === undefined || input === null) return "";
  if (typeof input !== "string") return JSON.stringify(input, null, 2);
  try {
    return JSON.stringify(JSON.parse(input), null, 2);
  } catch {
    return input;
  }
}

/** The text of a tool call's result contents. */
export function resultText(tc) {
  return (tc.content || [])
    .map((c) => (c.type === "text" ? c.text : c.type === "embeddedResource" ? `[${c.contentType || "resource"}]` : c.uri || `[${c.type}]`))
    .join("\n");
}

export class Activity {
  /**
   * @param element where the turns go
   * @param actions {server(customizationId) → {name}, giveUp(turnId, toolCallId),
   *                 authenticate(resource, token, scopes), openView(tc)}
   */
  constructor(element, actions) {
    this.element = element;
    this.actions = actions;
    this.seen = new Map(); // toolCallId → {started, ended} as seen here (ms)
  }

  render(chat) {
    const now = performance.now();
    const turns = [...(chat.turns || [])];
    if (chat.activeTurn) turns.push({ ...chat.activeTurn, active: true });
    for (const turn of turns) {
      for (const part of turn.responseParts || []) {
        if (part.kind !== "toolCall") continue;
        const tc = part.toolCall;
        const seen = this.seen.get(tc.toolCallId) || {};
        if (seen.started === undefined) seen.started = now;
        if (seen.ended === undefined && ["completed", "cancelled"].includes(tc.status)) seen.ended = now;
        this.seen.set(tc.toolCallId, seen);
      }
    }
    const list = turns.reverse().map((turn) => this.turn(turn));
    fill(this.element, list.length ? list : h("p", { class: "empty" }, "No harness tool calls yet."));
  }

  turn(turn) {
    const calls = (turn.responseParts || []).filter((p) => p.kind === "toolCall").map((p) => this.call(turn, p.toolCall));
    const notes = (turn.responseParts || []).filter((p) => p.kind === "markdown").map((p) => h("p", { class: "muted" }, p.content));
    return h(
      "article",
      { class: "turn", "data-turn": turn.id },
      h(
        "header",
        { class: "turn-head" },
        h("span", {}, turn.active ? "In progress" : `Turn ${turn.state || ""}`),
        turn.startedAt ? h("time", { class: "muted", datetime: turn.startedAt }, new Date(turn.startedAt).toLocaleTimeString()) : null,
        turn.duration !== undefined ? h("span", { class: "muted" }, `${turn.duration} ms`) : null,
      ),
      notes,
      calls,
    );
  }

  call(turn, tc) {
    const server = tc.contributor && tc.contributor.kind === "mcp" ? this.actions.server(tc.contributor.customizationId) : undefined;
    const seen = this.seen.get(tc.toolCallId) || {};
    const duration = seen.ended !== undefined ? Math.round(seen.ended - seen.started) : undefined;
    const status = tc.status === "completed" ? (tc.success ? "done" : "failed") : STATUS_LABEL[tc.status] || tc.status;
    const statusKind = tc.status === "completed" ? (tc.success ? "ok" : "failed") : tc.status;
    const ui = tc._meta && tc._meta.ui;
    const result = tc.status === "completed" ? resultText(tc) : "";
    return h(
      "div",
      { class: `call call-${statusKind}`, "data-tool": tc.toolName, "data-status": tc.status, "data-call": tc.toolCallId },
      h(
        "div",
        { class: "call-head" },
        h("strong", {}, tc.displayName || tc.toolName),
        tc.displayName && tc.displayName !== tc.toolName ? h("code", { class: "muted" }, tc.toolName) : null,
        server ? h("span", { class: "muted" }, `on ${server.name}`) : null,
        badge(status, `call-${statusKind}`),
        duration !== undefined ? h("span", { class: "muted" }, `${duration} ms`) : null,
        ui && ui.resourceUri && server ? h("button", { type: "button", onclick: () => this.actions.openView(tc) }, "Open view") : null,
      ),
      tc.toolInput !== undefined ? h("details", { class: "call-input" }, h("summary", {}, "Arguments"), h("pre", {}, prettyInput(tc.toolInput))) : null,
      result ? h("pre", { class: "call-result" }, result) : null,
      tc.status === "completed" && !tc.success && tc.error ? h("pre", { class: "call-error" }, text(tc.error.message || tc.error)) : null,
      tc.status === "completed" && !tc.success && !tc.error && tc.pastTenseMessage ? h("div", { class: "call-error" }, text(tc.pastTenseMessage)) : null,
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
