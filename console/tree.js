// The customization tree: plugins, directories and bare servers with their load state and
// problems (those with problems or failing servers first), children by kind, and every MCP
// server with its live state, controls and offer. Keyed by id, so a live change redraws one
// card or one server row, not the page, and the keyboard focus stays where it was.

import { h, fill, badge, plural, reconcile, Parts } from "./dom.js";

const KIND_LABEL = { skill: ["skill", "Skills"], agent: ["agent", "Agents"], prompt: ["prompt", "Prompts"], rule: ["rule", "Rules"], hook: ["hook", "Hooks"] };

/** Effective enablement of a plugin or server: the client's decision, else the declaration. */
function enabledOf(c) {
  if (c.type === "directory") return c.enabled !== false;
  if (Array.isArray(c.enablement) && c.enablement.length) return !!c.enablement[0].enabled;
  return undefined;
}

/** Whether a container has problems or a failing server (it is listed first). */
export function troubled(c) {
  const servers = c.type === "mcpServer" ? [c] : (c.children || []).filter((x) => x.type === "mcpServer");
  return !!(c.load && c.load.message) || servers.some((s) => s.state && (s.state.kind === "error" || s.state.kind === "authRequired"));
}

/** A button that stays focusable when it cannot act (`aria-disabled`), so the keyboard focus
 *  survives the state change it caused. */
function control(label, key, enabled, onclick, name) {
  return h(
    "button",
    {
      type: "button",
      "data-key": key,
      "aria-disabled": enabled ? undefined : "true",
      "aria-label": name,
      onclick: () => enabled && onclick(),
    },
    label,
  );
}

export class Tree {
  /**
   * @param element where the tree goes
   * @param actions {toggle(c, enabled), start(id), stop(id), restart(id),
   *                 authenticate(resource, token, scopes), offer(server) → element,
   *                 toolCount(server)}
   */
  constructor(element, actions) {
    this.element = element;
    this.actions = actions;
    this.cards = new Map(); // container id → card element
    this.rows = new Map(); // server id → row element
    this.servers = new Map(); // server id → {server, container}
    // Cards and rows are kept by id and updated in place, each part (a card's head, its
    // problems, its children; a row's head, error, token form, offer) drawn again only when
    // what it shows changed: what a person opened, typed or focused stays.
    this.parts = new Parts();
  }

  /** Everything (a snapshot or `customizationsChanged`); troubled containers first. Cards
   *  and rows already drawn are kept and brought up to date. */
  render(customizations) {
    const list = customizations || [];
    const ordered = [...list.filter(troubled), ...list.filter((c) => !troubled(c))];
    const cards = ordered.map((c) => this.card(c));
    const ids = new Set(list.map((c) => c.id));
    for (const id of this.cards.keys()) if (!ids.has(id)) this.cards.delete(id);
    const servers = new Set(list.flatMap((c) => (c.type === "mcpServer" ? [c] : (c.children || []).filter((x) => x.type === "mcpServer"))).map((s) => s.id));
    this.forgetServers((id) => !servers.has(id));
    if (list.length) reconcile(this.element, cards);
    else fill(this.element, h("p", { class: "empty" }, "No plugins, directories or servers found."));
  }

  /** One container brought up to date (updated, toggled, or its child removed); appended
   *  when new. */
  container(c) {
    const servers = new Set((c.type === "mcpServer" ? [c] : (c.children || []).filter((x) => x.type === "mcpServer")).map((s) => s.id));
    this.forgetServers((id, entry) => entry.container && entry.container.id === c.id && !servers.has(id));
    const card = this.card(c);
    if (!card.isConnected) {
      this.element.querySelector(":scope > .empty")?.remove();
      this.element.append(card);
    }
  }

  forgetServers(gone) {
    for (const [id, entry] of this.servers) {
      if (gone(id, entry)) {
        this.servers.delete(id);
        this.rows.delete(id);
      }
    }
  }

  remove(id) {
    const card = this.cards.get(id);
    if (card) {
      card.remove();
      this.cards.delete(id);
    }
  }

  /** One server's row brought up to date (its state changed). */
  server(server, container) {
    if (this.rows.has(server.id)) this.serverRow(server, container);
  }

  card(c) {
    let card = this.cards.get(c.id);
    if (!card || card.dataset.type !== c.type) {
      const old = card;
      card = h("section", { class: `card card-${c.type}`, "data-id": c.id, "data-type": c.type, tabindex: "-1" });
      this.cards.set(c.id, card);
      if (old && old.isConnected) old.replaceWith(card); // another kind of container now
    }
    card.setAttribute("aria-label", c.name);
    if (c.type === "mcpServer") {
      reconcile(card, [this.serverRow(c, c)]);
      return card;
    }
    const load = c.load || { kind: "loaded" };
    const problems = (load.message || "").split("\n").filter(Boolean);
    const children = Array.isArray(c.children) ? c.children : [];
    const servers = children.filter((x) => x.type === "mcpServer");
    const others = children.filter((x) => x.type !== "mcpServer");
    const enabled = enabledOf(c);
    const head = this.parts.get(card, "head", JSON.stringify([c.name, c.version, c.type, c.contents, c.writable, load.kind, enabled]), () =>
      h(
        "header",
        { class: "card-head" },
        h("h3", { class: "card-title" }, c.name),
        c.version ? h("span", { class: "muted" }, `v${c.version}`) : null,
        c.type === "directory" ? h("span", { class: "muted" }, `${c.contents || ""} directory${c.writable ? ", writable" : ""}`) : null,
        badge(load.kind, `load-${load.kind}`),
        this.toggleButton(c, enabled),
      ),
    );
    const problemList = this.parts.get(card, "problems", problems.join("\n"), () =>
      problems.length ? h("ul", { class: "problems", "aria-label": "problems" }, problems.map((p) => h("li", { class: "problem" }, p))) : null,
    );
    const childList = this.parts.get(card, "children", JSON.stringify(others.map((x) => [x.type, x.name, x.description, x.enabled])), () =>
      others.length ? this.childList(others) : null,
    );
    reconcile(card, [head, problemList, ...servers.map((s) => this.serverRow(s, c)), childList]);
    return card;
  }

  /** Children other than servers, grouped by kind, built when first opened. */
  childList(children) {
    const counts = {};
    for (const child of children) counts[child.type] = (counts[child.type] || 0) + 1;
    const summary = Object.entries(counts)
      .map(([kind, n]) => (KIND_LABEL[kind] ? plural(n, KIND_LABEL[kind][0]) : `${n} ${kind}`))
      .join(", ");
    const details = h("details", { class: "children" }, h("summary", {}, summary));
    details.addEventListener("toggle", () => {
      if (!details.open || details.dataset.built) return;
      details.dataset.built = "1";
      for (const kind of Object.keys(counts)) {
        details.append(
          h("h4", {}, KIND_LABEL[kind] ? KIND_LABEL[kind][1] : kind),
          h(
            "ul",
            { class: "child-list" },
            children
              .filter((x) => x.type === kind)
              .map((x) =>
                h(
                  "li",
                  { class: x.enabled === false ? "disabled" : undefined },
                  h("span", { class: "child-name" }, x.name),
                  x.description ? h("span", { class: "muted" }, ` — ${x.description}`) : null,
                ),
              ),
          ),
        );
      }
    });
    return details;
  }

  /** The enable switch: its name is its visible label ("Enabled") and whose it is; its
   *  state is `aria-checked`, drawn as the switch's knob. */
  toggleButton(c, enabled) {
    const on = enabled !== false;
    return h(
      "button",
      {
        class: "toggle",
        type: "button",
        role: "switch",
        "data-key": `toggle:${c.id}`,
        "aria-checked": String(on),
        "aria-label": `Enabled: ${c.name}`,
        title: enabled === undefined ? "as declared" : "set in this session",
        onclick: () => this.actions.toggle(c, !on),
      },
      h("span", { class: "knob", "aria-hidden": "true" }),
      "Enabled",
    );
  }

  serverRow(s, container) {
    this.servers.set(s.id, { server: s, container });
    const state = s.state || { kind: "stopped" };
    const kind = state.kind;
    const busy = kind === "starting";
    const tools = this.actions.toolCount(s);
    let row = this.rows.get(s.id);
    if (!row) {
      row = h("div", { tabindex: "-1" });
      this.rows.set(s.id, row);
    }
    row.className = `server server-${kind}`;
    row.dataset.server = s.name;
    row.dataset.id = s.id;
    row.dataset.state = kind;
    const enabled = enabledOf(s);
    // A start past the start timeout that still goes on (the host's `ahp-proxy/start`).
    const slow = busy && s._meta?.["ahp-proxy/start"]?.slow === true;
    row.dataset.slow = String(slow);
    const head = this.parts.get(row, "head", JSON.stringify([s.name, kind, tools, enabled, slow]), () =>
      h(
        "div",
        { class: "server-head" },
        h("span", { class: "server-name" }, s.name),
        badge(slow ? "starting (slow)" : kind, `state-${kind}`),
        tools !== undefined ? h("span", { class: "muted tool-count" }, plural(tools, "tool")) : null,
        h(
          "span",
          { class: "controls" },
          // A bare server's card carries no head of its own: the switch is here.
          this.toggleButton(s, enabled),
          control("Start", `start:${s.id}`, kind !== "ready" && !busy, () => this.actions.start(s.id), `Start ${s.name}`),
          control("Stop", `stop:${s.id}`, kind !== "stopped", () => this.actions.stop(s.id), `Stop ${s.name}`),
          control("Restart", `restart:${s.id}`, kind !== "stopped" && !busy, () => this.actions.restart(s.id), `Restart ${s.name}`),
        ),
      ),
    );
    const failed = kind === "error" && state.error;
    const error = this.parts.get(row, "error", failed ? JSON.stringify(state.error) : "", () =>
      failed
        ? h("div", { class: "server-error" }, h("strong", {}, state.error.errorType || "error"), h("pre", { class: "error-message" }, state.error.message || ""))
        : null,
    );
    const auth = this.parts.get(row, "auth", kind === "authRequired" ? JSON.stringify(state) : "", () => (kind === "authRequired" ? this.authForm(s, state) : null));
    reconcile(row, [head, error, auth, kind === "ready" && s.channel ? this.actions.offer(s) : null]);
    return row;
  }

  authForm(s, state) {
    const resource = (state.resource && state.resource.resource) || "";
    const scopes = state.requiredScopes || [];
    const input = h("input", { type: "password", autocomplete: "off", placeholder: "paste an access token", "aria-label": `Token for ${resource}` });
    return h(
      "form",
      {
        class: "auth",
        onsubmit: (event) => {
          event.preventDefault();
          this.actions.authenticate(resource, input.value, scopes);
        },
      },
      h("div", {}, `Authorization ${state.reason || "required"} for `, h("code", {}, resource)),
      scopes.length ? h("div", {}, "Scopes: ", h("code", {}, scopes.join(" "))) : null,
      state.description ? h("div", { class: "muted" }, state.description) : null,
      h("label", {}, input),
      h("button", { type: "submit" }, "Authenticate"),
    );
  }

  /** Name and container of server `id`, for the activity pane. */
  describe(id) {
    const entry = this.servers.get(id);
    return entry ? { name: entry.server.name, server: entry.server, container: entry.container } : undefined;
  }

  /** Bring what `id` names (a server or a container) into sight and give it the focus. */
  reveal(id) {
    const target = this.rows.get(id) || this.cards.get(id);
    if (!target) return false;
    target.scrollIntoView({ block: "start", behavior: "instant" });
    target.focus({ preventScroll: true });
    return true;
  }
}
