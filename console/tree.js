// The customization tree: plugins, directories and bare servers with their load state and
// problems, children by kind, and every MCP server with its live state and controls.
// Keyed by id, so a live change re-renders one card or one server row, not the page.

import { h, fill, badge } from "./dom.js";

const KIND_LABEL = { skill: "Skills", agent: "Agents", prompt: "Prompts", rule: "Rules", hook: "Hooks" };

/** Effective enablement of a plugin or server: the client's decision, else the declaration. */
function enabledOf(c) {
  if (c.type === "directory") return c.enabled !== false;
  if (Array.isArray(c.enablement) && c.enablement.length) return !!c.enablement[0].enabled;
  return undefined;
}

function shortName(uri) {
  try {
    return decodeURIComponent(uri.replace(/^file:\/\//, ""));
  } catch {
    return uri;
  }
}

export class Tree {
  /**
   * @param element where the tree goes
   * @param actions {toggle(c, enabled), start(id), stop(id), restart(id),
   *                 authenticate(resource, token, scopes), apps(server, element), toolCount(server)}
   */
  constructor(element, actions) {
    this.element = element;
    this.actions = actions;
    this.cards = new Map(); // container id → card element
    this.rows = new Map(); // server id → row element
    this.servers = new Map(); // server id → {server, container}
  }

  /** Everything anew (a snapshot or `customizationsChanged`). */
  render(customizations) {
    this.cards.clear();
    this.rows.clear();
    this.servers.clear();
    const fragment = document.createDocumentFragment();
    for (const c of customizations || []) fragment.append(this.card(c));
    fill(this.element, customizations && customizations.length ? fragment : h("p", { class: "empty" }, "No plugins, directories or servers found."));
  }

  /** One container anew (updated, toggled, or its child removed); appended when new. */
  container(c) {
    const old = this.cards.get(c.id);
    for (const [id, entry] of this.servers) {
      if (entry.container && entry.container.id === c.id) {
        this.servers.delete(id);
        this.rows.delete(id);
      }
    }
    const card = this.card(c);
    if (old) old.replaceWith(card);
    else this.element.append(card);
  }

  remove(id) {
    const card = this.cards.get(id);
    if (card) {
      card.remove();
      this.cards.delete(id);
    }
  }

  /** One server's row anew (its state changed). */
  server(server, container) {
    const old = this.rows.get(server.id);
    const row = this.serverRow(server, container);
    if (old) old.replaceWith(row);
  }

  card(c) {
    let card;
    if (c.type === "mcpServer") {
      card = h("section", { class: "card card-server", "data-id": c.id }, this.serverRow(c, undefined));
    } else {
      const load = c.load || { kind: "loaded" };
      const problems = (load.message || "").split("\n").filter(Boolean);
      const children = Array.isArray(c.children) ? c.children : [];
      const servers = children.filter((x) => x.type === "mcpServer");
      const others = children.filter((x) => x.type !== "mcpServer");
      const enabled = enabledOf(c);
      card = h(
        "section",
        { class: `card card-${c.type}`, "data-id": c.id, "aria-label": c.name },
        h(
          "header",
          { class: "card-head" },
          h("h3", { class: "card-title" }, c.name),
          c.version ? h("span", { class: "muted" }, `v${c.version}`) : null,
          c.type === "directory" ? h("span", { class: "muted" }, `${c.contents || ""} directory${c.writable ? ", writable" : ""}`) : null,
          badge(load.kind, `load-${load.kind}`),
          this.toggleButton(c, enabled),
        ),
        problems.length
          ? h("ul", { class: "problems", "aria-label": "problems" }, problems.map((p) => h("li", { class: "problem" }, p)))
          : null,
        servers.map((s) => this.serverRow(s, c)),
        others.length ? this.childList(others) : null,
      );
    }
    this.cards.set(c.id, card);
    return card;
  }

  /** Children other than servers, grouped by kind, built when first opened. */
  childList(children) {
    const counts = {};
    for (const child of children) counts[child.type] = (counts[child.type] || 0) + 1;
    const summary = Object.entries(counts)
      .map(([kind, n]) => `${n} ${(KIND_LABEL[kind] || kind).toLowerCase()}`)
      .join(", ");
    const details = h("details", { class: "children" }, h("summary", {}, summary));
    details.addEventListener(
      "toggle",
      () => {
        if (!details.open || details.dataset.built) return;
        details.dataset.built = "1";
        for (const kind of Object.keys(counts)) {
          details.append(
            h("h4", {}, KIND_LABEL[kind] || kind),
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
      },
    );
    return details;
  }

  toggleButton(c, enabled) {
    const on = enabled !== false;
    return h(
      "button",
      {
        class: "toggle",
        type: "button",
        role: "switch",
        "aria-checked": String(on),
        "aria-label": `${on ? "Disable" : "Enable"} ${c.name}`,
        title: enabled === undefined ? "as declared" : "set in this session",
        onclick: () => this.actions.toggle(c, !on),
      },
      on ? "Enabled" : "Disabled",
    );
  }

  serverRow(s, container) {
    this.servers.set(s.id, { server: s, container });
    const state = s.state || { kind: "stopped" };
    const kind = state.kind;
    const busy = kind === "starting";
    const tools = this.actions.toolCount(s);
    const row = h(
      "div",
      { class: `server server-${kind}`, "data-server": s.name, "data-id": s.id, "data-state": kind },
      h(
        "div",
        { class: "server-head" },
        h("span", { class: "server-name" }, s.name),
        badge(kind, `state-${kind}`),
        tools !== undefined ? h("span", { class: "muted tool-count" }, `${tools} tool${tools === 1 ? "" : "s"}`) : null,
        h(
          "span",
          { class: "controls" },
          this.toggleButton(s, enabledOf(s)),
          h("button", { type: "button", onclick: () => this.actions.start(s.id), disabled: kind === "ready" || busy, "aria-label": `Start ${s.name}` }, "Start"),
          h("button", { type: "button", onclick: () => this.actions.stop(s.id), disabled: kind === "stopped", "aria-label": `Stop ${s.name}` }, "Stop"),
          h("button", { type: "button", onclick: () => this.actions.restart(s.id), disabled: kind === "stopped" || busy, "aria-label": `Restart ${s.name}` }, "Restart"),
        ),
      ),
      kind === "error" && state.error
        ? h(
            "div",
            { class: "server-error", role: "status" },
            h("strong", {}, state.error.errorType || "error"),
            h("pre", { class: "error-message" }, state.error.message || ""),
          )
        : null,
      kind === "authRequired" ? this.authForm(s, state) : null,
      kind === "ready" && s.mcpApp ? this.actions.apps(s) : null,
    );
    this.rows.set(s.id, row);
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
    return entry ? { name: entry.server.name, server: entry.server } : undefined;
  }
}

export { shortName };
