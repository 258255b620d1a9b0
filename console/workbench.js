// Each ready server's offer as a workbench: its MCP Apps one click away, then every tool
// (title, description, annotations, input and output schema) with a form to call it, every
// resource to read, every template to fill in and read, every prompt to get with its
// arguments; each answer shown beside what asked for it. All through the server's `mcp://`
// channel. One section per server, kept across redraws of its row (forms keep what was typed).

import { h, fill, plural, jsonDetails, announce, reconcile } from "./dom.js";
import { schemaForm } from "./form.js";
import { toolResult, resourceResult, promptResult, errorResult } from "./results.js";
import { uiResourceUri, visibility } from "./apps.js";

const ANNOTATIONS = [
  ["readOnlyHint", true, "read-only"],
  ["destructiveHint", true, "destructive"],
  ["idempotentHint", true, "idempotent"],
  ["openWorldHint", true, "open world"],
];

/** A URI template (RFC 6570, levels 1 to 3) filled in with `values`. */
export function expandTemplate(template, values) {
  return template.replace(/\{([+#./;?&]?)([^}]*)\}/g, (_, op, names) => {
    const parts = names
      .split(",")
      .map((n) => n.replace(/\*$|:\d+$/, ""))
      .filter((n) => values[n] !== undefined && values[n] !== "")
      .map((n) => {
        const raw = String(values[n]);
        const v = op === "+" || op === "#" ? encodeURI(raw) : encodeURIComponent(raw);
        return op === ";" || op === "?" || op === "&" ? `${n}=${v}` : v;
      });
    if (!parts.length) return "";
    const sep = { "": ",", "+": ",", "#": ",", ".": ".", "/": "/", ";": ";", "?": "&", "&": "&" }[op];
    const first = { "": "", "+": "", "#": "#", ".": ".", "/": "/", ";": ";", "?": "?", "&": "&" }[op];
    return first + parts.join(sep);
  });
}

/** The variable names of a URI template. */
export function templateVariables(template) {
  const names = [];
  for (const [, , list] of template.matchAll(/\{([+#./;?&]?)([^}]*)\}/g)) {
    for (const n of list.split(",")) {
      const name = n.replace(/\*$|:\d+$/, "");
      if (name && !names.includes(name)) names.push(name);
    }
  }
  return names;
}

function matches(words, text) {
  return words.every((w) => text.includes(w));
}

export class Workbench {
  /**
   * @param host {offers, request(method, params), current(serverId) → server, apps}
   */
  constructor(host) {
    this.host = host;
    // server id → {element, details, apps, built, words, server}: `server` is the mirror's
    // object as the section last drew it (rows are redrawn with every change of their
    // server), so building a section never searches the whole tree for it.
    this.sections = new Map();
  }

  /** Forget every section (a new connection). */
  reset() {
    this.sections.clear();
  }

  /** The section of ready server `server` (the same element every time, refreshed). */
  section(server) {
    let entry = this.sections.get(server.id);
    if (!entry) {
      const details = h("details", { class: "offer", "data-server": server.name }, h("summary", {}, "Tools, resources and prompts"));
      const apps = h("div", { class: "apps" });
      entry = { element: h("div", { class: "offer-host", "data-server": server.name }, apps, details), details, apps, built: false, words: [] };
      details.addEventListener("toggle", () => {
        if (details.open && !entry.built) this.build(server.id, entry);
      });
      this.sections.set(server.id, entry);
    }
    this.refresh(server, entry);
    return entry.element;
  }

  /** The offer of server `server` changed (a list was read): its section follows. */
  refresh(server, entry = this.sections.get(server.id)) {
    if (!entry) return;
    entry.server = server;
    const offer = this.host.offers.of(server) || {};
    const counts = [
      offer.tools && plural(offer.tools.length, "tool"),
      offer.resources && plural(offer.resources.length, "resource"),
      offer.templates && offer.templates.length ? plural(offer.templates.length, "template") : null,
      offer.prompts && plural(offer.prompts.length, "prompt"),
    ].filter(Boolean);
    const errors = Object.entries(offer.errors || {}).map(([list, message]) => `${list}: ${message}`);
    fill(
      entry.details.querySelector("summary"),
      "Tools, resources and prompts",
      counts.length ? h("span", { class: "muted" }, ` (${counts.join(", ")})`) : offer.loading ? h("span", { class: "muted" }, " (reading…)") : null,
      errors.length ? h("span", { class: "error" }, ` ${errors.join("; ")}`) : null,
    );
    const apps = (offer.tools || []).filter((t) => uiResourceUri(t) && visibility(t).includes("model"));
    const shown = entry.apps.dataset.tools || "";
    const names = apps.map((t) => t.name).join("\n");
    if (shown !== names) {
      entry.apps.dataset.tools = names;
      fill(entry.apps, apps.length ? [h("span", { class: "muted" }, "MCP Apps:"), apps.map((tool) => this.host.apps.tryIt(server, tool))] : null);
    }
    if (entry.built && entry.version !== offer.version) this.build(server.id, entry);
  }

  /** Show only the parts of server `id`'s offer whose names hold every one of `words` (lower
   *  case; none: all), opening it when `open`. */
  narrow(id, words, open) {
    const entry = this.sections.get(id);
    if (!entry) return;
    entry.words = words;
    if (open && !entry.details.open) {
      entry.details.open = true;
      if (!entry.built) this.build(id, entry);
    }
    if (entry.built) this.applyQuery(entry);
  }

  applyQuery(entry) {
    for (const item of entry.details.querySelectorAll("[data-match]")) {
      item.hidden = !matches(entry.words, item.dataset.match);
    }
  }

  /** Draw the offer of server `id` into its section, keyed: an item (tool, resource,
   *  template, prompt) whose definition did not change keeps its element, so an open form,
   *  what was typed into it, its answer and the keyboard focus stay when a list is read
   *  again. Items of a list not read yet (the server came back, its lists are on their way)
   *  are kept for when it is. */
  build(id, entry) {
    const offer = this.host.offers.of(entry.server) || {};
    entry.built = true;
    entry.version = offer.version;
    entry.items = entry.items || new Map(); // "Tools:name" → {key, element}
    entry.parts = entry.parts || new Map(); // "Tools" → {section, list, empty}
    const summary = entry.details.querySelector("summary");
    const part = (title, items, name, render, empty) => {
      if (items === undefined) return null;
      let p = entry.parts.get(title);
      if (!p) {
        p = {
          section: h("section", { class: `offer-part offer-${title.toLowerCase()}` }, h("h4", {}, title)),
          list: h("ul", { class: "offer-list" }),
          empty: h("p", { class: "muted" }, empty),
        };
        entry.parts.set(title, p);
      }
      const names = new Set();
      const elements = items.map((item) => {
        let at = `${title}:${name(item)}`;
        while (names.has(at)) at += "'"; // a name listed twice: each its own item
        names.add(at);
        const key = JSON.stringify(item);
        const known = entry.items.get(at);
        if (known && known.key === key) return known.element;
        const element = render(item);
        entry.items.set(at, { key, element });
        return element;
      });
      for (const at of entry.items.keys()) if (at.startsWith(`${title}:`) && !names.has(at)) entry.items.delete(at);
      reconcile(p.list, elements);
      reconcile(p.section, [p.section.firstChild, elements.length ? p.list : p.empty]);
      return p.section;
    };
    reconcile(entry.details, [
      summary,
      part("Tools", offer.tools, (t) => t.name, (tool) => this.tool(id, tool), "No tools."),
      part("Resources", offer.resources, (r) => r.uri, (resource) => this.resource(id, resource), "No resources."),
      offer.templates && offer.templates.length ? part("Templates", offer.templates, (t) => t.uriTemplate, (template) => this.template(id, template), "") : null,
      part("Prompts", offer.prompts, (p) => p.name, (prompt) => this.prompt(id, prompt), "No prompts."),
    ]);
    this.applyQuery(entry);
  }

  /** Ask `method` on server `id`'s channel; show the answer (or error) in `slot`. */
  async ask(id, method, params, slot, show) {
    const server = this.host.current(id);
    if (!server || !server.channel) {
      fill(slot, errorResult({ message: "the server is not ready" }));
      return undefined;
    }
    fill(slot, h("p", { class: "muted" }, "Waiting for the answer…"));
    const started = performance.now();
    try {
      const result = await this.host.request(method, { channel: server.channel, ...params });
      fill(slot, show(result, performance.now() - started));
      announce(`${server.name}: ${method} answered`);
      return result;
    } catch (error) {
      fill(slot, errorResult(error, performance.now() - started));
      announce(`${server.name}: ${method} failed`);
      return undefined;
    }
  }

  tool(id, tool) {
    const badges = ANNOTATIONS.filter(([key, value]) => tool.annotations && tool.annotations[key] === value).map(([, , label]) => h("span", { class: "badge badge-hint" }, label));
    if (uiResourceUri(tool)) badges.push(h("span", { class: "badge badge-hint" }, visibility(tool).includes("model") ? "MCP App" : "App only"));
    const title = tool.title || (tool.annotations && tool.annotations.title);
    const item = h(
      "li",
      { class: "tool", "data-tool": tool.name, "data-match": `${tool.name} ${title || ""}`.toLowerCase() },
      h(
        "details",
        { class: "tool-details" },
        h("summary", {}, h("code", { class: "tool-name" }, tool.name), title ? ` ${title}` : "", " ", badges),
      ),
    );
    const details = item.firstChild;
    details.addEventListener("toggle", () => {
      if (!details.open || details.dataset.built) return;
      details.dataset.built = "1";
      details.append(...this.toolBody(id, tool).filter(Boolean));
    });
    return item;
  }

  toolBody(id, tool) {
    const form = schemaForm(tool.inputSchema, tool.name);
    const slot = h("div", { class: "result-slot" });
    const call = h(
      "form",
      {
        class: "call-tool",
        "data-tool": tool.name,
        onsubmit: async (event) => {
          event.preventDefault();
          const args = form.submit();
          if (args === undefined) return;
          const server = this.host.current(id);
          const answer = this.ask(id, "tools/call", { name: tool.name, arguments: args }, slot, (result, ms) => toolResult(result, tool, ms));
          if (server && uiResourceUri(tool) && visibility(tool).includes("model")) {
            this.host.apps.show({ server, tool, args, result: answer.then((r) => r || Promise.reject(new Error("the call failed"))) });
          }
        },
      },
      form.element,
      h("button", { type: "submit", class: "primary" }, `Call ${tool.name}`),
    );
    return [
      tool.description ? h("p", { class: "description" }, tool.description) : null,
      call,
      jsonDetails("Input schema", tool.inputSchema || {}),
      tool.outputSchema ? jsonDetails("Output schema", tool.outputSchema) : null,
      tool.annotations ? jsonDetails("Annotations", tool.annotations) : null,
      slot,
    ];
  }

  resource(id, resource) {
    const slot = h("div", { class: "result-slot" });
    const read = h("button", { type: "button", "aria-label": `Read ${resource.name || resource.uri}` }, "Read");
    read.addEventListener("click", () => this.ask(id, "resources/read", { uri: resource.uri }, slot, resourceResult));
    return h(
      "li",
      { class: "resource", "data-uri": resource.uri, "data-match": `${resource.name || ""} ${resource.uri}`.toLowerCase() },
      h("div", { class: "item-head" }, h("strong", {}, resource.title || resource.name || resource.uri), " ", h("code", { class: "muted" }, resource.uri), resource.mimeType ? h("span", { class: "muted" }, ` ${resource.mimeType}`) : null, read),
      resource.description ? h("p", { class: "description" }, resource.description) : null,
      slot,
    );
  }

  template(id, template) {
    const slot = h("div", { class: "result-slot" });
    const inputs = templateVariables(template.uriTemplate).map((name) => ({ name, input: h("input", { type: "text", "data-variable": name }) }));
    const form = h(
      "form",
      {
        class: "read-template",
        onsubmit: (event) => {
          event.preventDefault();
          const values = Object.fromEntries(inputs.map(({ name, input }) => [name, input.value]));
          this.ask(id, "resources/read", { uri: expandTemplate(template.uriTemplate, values) }, slot, resourceResult);
        },
      },
      inputs.map(({ name, input }) => h("label", { class: "field" }, h("span", { class: "field-name" }, name), input)),
      h("button", { type: "submit" }, "Read"),
    );
    return h(
      "li",
      { class: "template", "data-template": template.uriTemplate, "data-match": `${template.name || ""} ${template.uriTemplate}`.toLowerCase() },
      h("div", { class: "item-head" }, h("strong", {}, template.title || template.name || ""), " ", h("code", { class: "muted" }, template.uriTemplate)),
      template.description ? h("p", { class: "description" }, template.description) : null,
      form,
      slot,
    );
  }

  prompt(id, prompt) {
    const slot = h("div", { class: "result-slot" });
    const args = (prompt.arguments || []).map((a) => ({ a, input: h("input", { type: "text", "data-argument": a.name, "aria-required": a.required ? "true" : undefined }) }));
    const form = h(
      "form",
      {
        class: "get-prompt",
        "data-prompt": prompt.name,
        onsubmit: (event) => {
          event.preventDefault();
          const values = Object.fromEntries(args.filter(({ input }) => input.value !== "").map(({ a, input }) => [a.name, input.value]));
          this.ask(id, "prompts/get", { name: prompt.name, arguments: values }, slot, promptResult);
        },
      },
      args.map(({ a, input }) =>
        h("label", { class: "field" }, h("span", { class: "field-name" }, a.name, a.required ? h("span", { class: "required", "aria-hidden": "true" }, " *") : null), a.description ? h("span", { class: "field-hint muted" }, ` ${a.description}`) : null, input),
      ),
      h("button", { type: "submit" }, `Get ${prompt.name}`),
    );
    return h(
      "li",
      { class: "prompt", "data-prompt": prompt.name, "data-match": `${prompt.name} ${prompt.title || ""}`.toLowerCase() },
      h("div", { class: "item-head" }, h("strong", {}, prompt.title || prompt.name), prompt.title ? h("code", { class: "muted" }, ` ${prompt.name}`) : null),
      prompt.description ? h("p", { class: "description" }, prompt.description) : null,
      form,
      slot,
    );
  }
}
