// At a glance: the header's counts (servers ready, starting, in error, stopped, waiting for a
// token; problems; calls pending approval) whose parts jump to what they count, and
// the "Needs attention" list above the tree: failing servers and files with problems first.

import { h, fill, plural } from "./dom.js";

const STATES = ["ready", "starting", "error", "stopped", "authRequired"];
const STATE_LABEL = { ready: "ready", starting: "starting", error: "error", stopped: "stopped", authRequired: "need a token" };

/** Every server and problem of `customizations`: counts by state, the problems, and what
 *  needs attention (servers in error or waiting for a token, containers with problems). Pure. */
export function survey(customizations) {
  const states = Object.fromEntries(STATES.map((s) => [s, 0]));
  let problems = 0;
  const attention = [];
  const server = (s, container) => {
    const kind = (s.state && s.state.kind) || "stopped";
    states[kind] = (states[kind] || 0) + 1;
    if (kind === "error" || kind === "authRequired") {
      const error = s.state.error || {};
      const first = (error.message || "").split("\n")[0].replace(/[;,.]?\s*last stderr lines:?$/i, "");
      const why = kind === "error" ? `${error.errorType || "error"}: ${first}` : `needs a token for ${(s.state.resource && s.state.resource.resource) || "its resource"}`;
      attention.push({ id: s.id, name: container && container.id !== s.id ? `${s.name} (${container.name})` : s.name, why, kind });
    }
  };
  for (const c of customizations || []) {
    if (c.type === "mcpServer") {
      server(c, c);
      continue;
    }
    const lines = ((c.load && c.load.message) || "").split("\n").filter(Boolean);
    problems += lines.length;
    for (const line of lines) attention.push({ id: c.id, name: c.name, why: line, kind: "problem" });
    for (const child of c.children || []) if (child.type === "mcpServer") server(child, c);
  }
  return { states, problems, attention };
}

export class Summary {
  /**
   * @param nav the header's summary
   * @param attention where the "Needs attention" list goes
   * @param actions {filter(query), jump(id), approvals()}
   */
  constructor(nav, attention, actions) {
    this.nav = nav;
    this.attention = attention;
    this.actions = actions;
    this.shown = { nav: "", attention: "" };
  }

  /** Draw the counts of `customizations` and `pending` calls waiting for approval. */
  render(customizations, pending = 0) {
    const { states, problems, attention } = survey(customizations);
    const parts = STATES.filter((s) => s !== "authRequired" || states[s] > 0).map((s) => ({
      key: `state:${s}`,
      text: `${states[s]} ${STATE_LABEL[s]}`,
      n: states[s],
      kind: s,
    }));
    parts.push({ key: "is:problem", text: plural(problems, "problem"), n: problems, kind: "problem" });
    const navText = JSON.stringify([parts, pending]);
    if (navText !== this.shown.nav) {
      this.shown.nav = navText;
      this.keepFocus(this.nav, () =>
        fill(
          this.nav,
          parts.map((p) =>
            h(
              "button",
              {
                type: "button",
                class: `sum sum-${p.kind}${p.n ? "" : " zero"}`,
                "data-key": p.key,
                "data-count": p.n,
                "aria-label": `${p.text}: show them`,
                onclick: () => this.actions.filter(p.key),
              },
              p.text,
            ),
          ),
          // Calls waiting for approval: hidden until there are some; jumps to their list.
          h(
            "button",
            {
              type: "button",
              class: "sum sum-approvals",
              "data-key": "is:pending",
              "data-count": pending,
              "aria-label": `${plural(pending, "pending approval")}: show them`,
              hidden: pending === 0,
              onclick: () => this.actions.approvals(),
            },
            plural(pending, "pending approval"),
          ),
        ),
      );
    }
    const attentionText = JSON.stringify(attention);
    if (attentionText !== this.shown.attention) {
      this.shown.attention = attentionText;
      this.keepFocus(this.attention, () =>
        fill(
          this.attention,
          attention.length
            ? [
                h("h3", { id: "attention-title" }, `Needs attention (${attention.length})`),
                h(
                  "ul",
                  { class: "attention-list", "aria-labelledby": "attention-title" },
                  attention.map((a, i) =>
                    h(
                      "li",
                      { class: `attention-${a.kind}` },
                      h("button", { type: "button", class: "link", "data-key": `attention:${a.id}:${i}`, onclick: () => this.actions.jump(a.id) }, a.name),
                      " ",
                      h("span", { class: a.kind === "problem" ? "problem-text" : "error-text" }, a.why),
                    ),
                  ),
                ),
              ]
            : null,
        ),
      );
    }
  }

  keepFocus(element, redraw) {
    const focused = element.contains(document.activeElement) ? document.activeElement.dataset.key : undefined;
    redraw();
    if (focused) element.querySelector(`[data-key="${CSS.escape(focused)}"]`)?.focus({ preventScroll: true });
  }
}
