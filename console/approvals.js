// Approvals: the harness tool calls the session lists as waiting for a decision
// (`inputNeeded`, kind `toolConfirmation`), at the top of the page. A call pending
// confirmation shows its tool, server, who asked, the host's message (arguments and
// annotations), its input editable as JSON, the options, and Approve / Deny with a reason;
// a result pending review shows the result with Approve / Deny. Decisions go out as
// `chat/toolCallConfirmed` / `chat/toolCallResultConfirmed`, as any AHP client sends them.

import { h, fill, pretty } from "./dom.js";
import { hostTiming, inline, resultText, text } from "./activity.js";

/** The entries of `session.inputNeeded` that wait for an approval. Pure. */
export function waiting(session) {
  return ((session && session.inputNeeded) || []).filter(
    (r) => r.kind === "toolConfirmation" && r.toolCall && (r.toolCall.status === "pending-confirmation" || r.toolCall.status === "pending-result-confirmation"),
  );
}

/**
 * The action deciding `request` (a `toolConfirmation` entry): `approved`, the chosen
 * option, the input as edited (JSON text; sent only when it differs), the denial's reason.
 * Throws when the edited input is not JSON. Pure.
 */
export function decision(request, { approved, option, input, reason }) {
  const call = request.toolCall;
  const base = { turnId: request.turnId, toolCallId: call.toolCallId };
  if (call.status === "pending-result-confirmation") return { type: "chat/toolCallResultConfirmed", ...base, approved };
  const action = { type: "chat/toolCallConfirmed", ...base, approved };
  if (approved) {
    action.confirmed = "user-action";
    action.selectedOptionId = option || "allow-once";
    if (input !== undefined && typeof call.toolInput === "string") {
      const edited = JSON.stringify(JSON.parse(input));
      let original;
      try {
        original = JSON.stringify(JSON.parse(call.toolInput));
      } catch {
        original = call.toolInput;
      }
      if (edited !== original) action.editedToolInput = edited;
    }
  } else {
    action.reason = "denied";
    action.selectedOptionId = "deny";
    if (reason && reason.trim()) action.reasonMessage = reason.trim();
  }
  return action;
}

export class Approvals {
  /**
   * @param element the section at the top of the page
   * @param actions {decide(channel, action), server(customizationId) → {name}, clientId}
   */
  constructor(element, actions) {
    this.element = element;
    this.actions = actions;
    this.shown = new Map(); // entry id → {key, element}
    this.list = h("ul", { class: "approvals-list" });
    this.title = h("h2", { id: "approvals-title" });
    fill(this.element, this.title, this.list);
    this.element.setAttribute("aria-labelledby", "approvals-title");
    this.element.hidden = true;
  }

  /** Draw what `session` waits for; entries unchanged keep their element (and their edits). */
  render(session) {
    const entries = waiting(session);
    const keep = new Set(entries.map((r) => r.id));
    for (const [id, entry] of this.shown) {
      if (!keep.has(id)) {
        entry.element.remove();
        this.shown.delete(id);
      }
    }
    entries.forEach((request, i) => {
      const key = JSON.stringify(request);
      const old = this.shown.get(request.id);
      let element = old && old.element;
      if (!old || old.key !== key) {
        element = this.item(request);
        if (old) old.element.replaceWith(element);
        this.shown.set(request.id, { key, element });
      }
      // In the session's order; an element already in place is not moved (it keeps focus).
      if (this.list.children[i] !== element) this.list.insertBefore(element, this.list.children[i] || null);
    });
    this.element.hidden = entries.length === 0;
    this.title.textContent = `Waiting for approval (${entries.length})`;
    return entries.length;
  }

  item(request) {
    const call = request.toolCall;
    const result = call.status === "pending-result-confirmation";
    const server = call.contributor && call.contributor.customizationId && this.actions.server(call.contributor.customizationId);
    const timing = hostTiming(call);
    const who = timing.clientId === undefined ? "the harness" : timing.clientId === this.actions.clientId ? "this console" : `AHP client ${timing.clientId}`;
    const error = h("p", { class: "error-text approval-error", hidden: true });
    const send = (fields) => {
      let action;
      try {
        action = decision(request, fields);
      } catch (e) {
        error.hidden = false;
        error.textContent = `The input is not JSON: ${e.message}`;
        return;
      }
      error.hidden = true;
      for (const b of li.querySelectorAll("button")) b.disabled = true;
      this.actions.decide(request.chat, action);
    };
    const head = h(
      "div",
      { class: "approval-head" },
      h("strong", {}, text(call.confirmationTitle) ? inline(call.confirmationTitle) : result ? `Review the result of ${call.toolName}` : `Allow ${call.toolName}?`),
      " ",
      h("span", { class: "muted" }, `tool ${call.toolName}`, server ? ` on ${server.name}` : "", `, asked by ${who}`),
    );
    const message = h("pre", { class: "approval-message" }, text(call.invocationMessage));
    let li;
    if (result) {
      li = h(
        "li",
        { class: "approval", "data-id": call.toolCallId, "data-tool": call.toolName, "data-kind": "result" },
        head,
        message,
        h("h4", {}, call.success ? "Result" : "Result (an error)"),
        h("pre", { class: "approval-result" }, resultText(call) || pretty(call.structuredContent)),
        h(
          "div",
          { class: "approval-buttons" },
          h("button", { type: "button", class: "primary approve", "data-key": `approve:${call.toolCallId}`, onclick: () => send({ approved: true }) }, "Approve result"),
          h("button", { type: "button", class: "danger deny", "data-key": `deny:${call.toolCallId}`, onclick: () => send({ approved: false }) }, "Deny result"),
        ),
        error,
      );
      return li;
    }
    const inputId = `approval-input-${call.toolCallId}`;
    const input = h("textarea", { id: inputId, class: "approval-input", rows: 4, spellcheck: "false", readonly: call.editable === false }, pretty(call.toolInput));
    const approveOptions = (call.options || []).filter((o) => o.kind === "approve");
    const group = `approval-option-${call.toolCallId}`;
    const options = approveOptions.map((o, i) =>
      h("label", { class: "approval-option" }, h("input", { type: "radio", name: group, value: o.id, checked: i === 0 }), ` ${o.label}`),
    );
    const reason = h("input", { type: "text", class: "approval-reason", placeholder: "Reason (optional)", "aria-label": `Why deny ${call.toolName}` });
    const chosen = () => (li.querySelector(`input[name="${CSS.escape(group)}"]:checked`) || {}).value;
    li = h(
      "li",
      { class: "approval", "data-id": call.toolCallId, "data-tool": call.toolName, "data-kind": "call" },
      head,
      message,
      h("label", { for: inputId, class: "muted" }, call.editable === false ? "Input" : "Input (JSON, editable)"),
      input,
      options.length ? h("fieldset", { class: "approval-options" }, h("legend", {}, "Allow"), options) : null,
      h(
        "div",
        { class: "approval-buttons" },
        h("button", { type: "button", class: "primary approve", "data-key": `approve:${call.toolCallId}`, onclick: () => send({ approved: true, option: chosen(), input: input.value }) }, "Approve"),
        reason,
        h("button", { type: "button", class: "danger deny", "data-key": `deny:${call.toolCallId}`, onclick: () => send({ approved: false, reason: reason.value }) }, "Deny"),
      ),
      error,
    );
    return li;
  }
}
