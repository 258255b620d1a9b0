// MCP Apps, rendered as the MCP Apps spec asks a web host to: the View's HTML comes from
// `resources/read` on the server's `mcp://` channel and runs in a sandboxed relay iframe on
// the View origin (another port), whose content security policy is the one the resource
// declares; `@modelcontextprotocol/ext-apps`' AppBridge (vendored, loaded on first use)
// speaks `ui/*` with it. The View's tools/call, resources/*, logging and sampling go over
// the same channel; nothing else is offered (the host capabilities are exactly `mcpApp`).

import { h } from "./dom.js";
import { schemaForm } from "./form.js";

let library;
/** The vendored App host library, loaded the first time a View opens. */
function bridgeLibrary() {
  library ||= import("./vendor/app-bridge.js");
  return library;
}

const HOST_INFO = { name: "ahp-proxy console", version: "1" };

/** The `ui://` resource of a tool's View, if it has one. */
export function uiResourceUri(tool) {
  const meta = tool && tool._meta;
  const uri = (meta && meta.ui && meta.ui.resourceUri) || (meta && meta["ui/resourceUri"]);
  return typeof uri === "string" && uri.startsWith("ui://") ? uri : undefined;
}

/** Who may call a tool with a View: `model`, `app` or both. */
export function visibility(tool) {
  const v = tool && tool._meta && tool._meta.ui && tool._meta.ui.visibility;
  return Array.isArray(v) ? v : ["model", "app"];
}

function decodeBase64(text) {
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** An AHP tool call's result as the MCP `CallToolResult` a View expects. */
export function callToolResult(tc) {
  const content = (tc.content || []).map((c) =>
    c.type === "text" ? { type: "text", text: c.text } : { type: "text", text: c.uri || `[${c.contentType || c.type}]` },
  );
  const result = { content, isError: !tc.success };
  if (tc.structuredContent) result.structuredContent = tc.structuredContent;
  return result;
}

export class Apps {
  /**
   * @param element where open Views go
   * @param host {request(method, params), notify(method, params), tools(server) → tools[]
   *              (the server's, as read through its channel), viewOrigin, theme()}
   */
  constructor(element, host) {
    this.element = element;
    this.host = host;
    this.open = new Set();
  }

  /** A form to call App tool `tool` of `server` and open its View ("Try it"). */
  tryIt(server, tool) {
    const form = schemaForm(tool.inputSchema, tool.name);
    const element = h(
      "form",
      {
        class: "try-it",
        "data-tool": tool.name,
        onsubmit: (event) => {
          event.preventDefault();
          const args = form.submit();
          if (args === undefined) return;
          const result = this.host.request("tools/call", { channel: server.channel, name: tool.name, arguments: args });
          this.show({ server, tool, args, result });
        },
      },
      h("strong", {}, tool.title || tool.name),
      tool.description ? h("span", { class: "muted" }, ` ${tool.description}`) : null,
      form.element,
      h("button", { type: "submit", "aria-label": `Try ${tool.name} on ${server.name}` }, "Try it"),
    );
    return element;
  }

  /** Open a harness call's View (input and result from the AHP tool call). */
  async showCall(server, tc) {
    const tools = this.host.tools(server) || [];
    const tool = tools.find((t) => t.name === tc.toolName) || { name: tc.toolName, inputSchema: { type: "object" }, _meta: tc._meta };
    let args = {};
    try {
      args = typeof tc.toolInput === "string" ? JSON.parse(tc.toolInput) : tc.toolInput || {};
    } catch {
      args = {};
    }
    const result = tc.status === "completed" ? Promise.resolve(callToolResult(tc)) : new Promise(() => {});
    this.show({ server, tool, args, result });
  }

  /** Render `tool`'s View for one call of it. */
  async show({ server, tool, args, result }) {
    const uri = uiResourceUri(tool);
    const log = h("ul", { class: "view-log", "aria-label": "View log" });
    const status = h("p", { class: "muted", role: "status" }, "Loading the View…");
    const iframe = h("iframe", {
      class: "view-frame",
      title: `${tool.name} (${server.name})`,
      sandbox: "allow-scripts allow-same-origin allow-forms",
    });
    const panel = h(
      "section",
      { class: "view", "data-tool": tool.name, "data-server": server.name, "aria-label": `View of ${tool.name}` },
      h(
        "header",
        { class: "view-head" },
        h("strong", {}, tool.title || tool.name),
        h("span", { class: "muted" }, ` on ${server.name} — ${uri}`),
        h("button", { type: "button", class: "close", "aria-label": `Close the View of ${tool.name}`, onclick: () => view.close("closed by the user") }, "Close"),
      ),
      status,
      iframe,
      log,
    );
    const view = { panel, close: async () => panel.remove() };
    this.element.prepend(panel);
    this.open.add(view);
    // Brought into sight below the sticky header (the style's scroll margin).
    panel.scrollIntoView({ block: "start", behavior: "instant" });
    panel.querySelector("button.close").focus({ preventScroll: true });
    const note = (text) => log.append(h("li", {}, text));
    try {
      const { AppBridge, PostMessageTransport } = await bridgeLibrary();
      const read = await this.host.request("resources/read", { channel: server.channel, uri });
      const content = (read.contents || [])[0];
      if (!content) throw new Error(`${uri}: no contents`);
      if (content.mimeType !== "text/html;profile=mcp-app") throw new Error(`${uri}: ${content.mimeType} is not an MCP App View`);
      const html = typeof content.text === "string" ? content.text : decodeBase64(content.blob || "");
      const ui = (content._meta && content._meta.ui) || {};
      if (ui.prefersBorder === false) panel.classList.add("borderless");
      const capabilities = server.mcpApp.capabilities;
      const context = {
        theme: this.host.theme(),
        displayMode: "inline",
        availableDisplayModes: ["inline"],
        containerDimensions: { maxHeight: 720 },
        locale: navigator.language,
        timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
        platform: "web",
        userAgent: HOST_INFO.name,
        toolInfo: { tool },
      };
      const bridge = new AppBridge(null, HOST_INFO, capabilities, { hostContext: context });
      const channel = server.channel;
      const on = (method) => (params) => this.host.request(method, { ...(params || {}), channel });
      bridge.oncalltool = async (params) => {
        const tools = this.host.tools(server) || [];
        const called = tools.find((t) => t.name === params.name);
        if (called && !visibility(called).includes("app")) {
          throw new Error(`tool ${params.name} is not callable from a View`);
        }
        note(`tools/call ${params.name}`);
        return on("tools/call")(params);
      };
      if (capabilities.serverResources) {
        bridge.onreadresource = on("resources/read");
        bridge.onlistresources = on("resources/list");
        bridge.onlistresourcetemplates = on("resources/templates/list");
      }
      if (capabilities.sampling) bridge.oncreatesamplingmessage = on("sampling/createMessage");
      bridge.onloggingmessage = (params) => {
        note(`${params.level}: ${typeof params.data === "string" ? params.data : JSON.stringify(params.data)}`);
        if (capabilities.logging) this.host.notify("notifications/message", { ...params, channel });
      };
      bridge.onsizechange = ({ width, height }) => {
        // The frame is border-box: its borders come on top of what the View asks for.
        const style = getComputedStyle(iframe);
        const px = (name) => parseFloat(style[name]) || 0;
        if (height !== undefined) {
          iframe.style.height = `${Math.min(height, 720) + px("borderTopWidth") + px("borderBottomWidth")}px`;
        }
        if (width !== undefined) {
          iframe.style.minWidth = `min(${width + px("borderLeftWidth") + px("borderRightWidth")}px, 100%)`;
        }
      };
      bridge.onrequestteardown = () => view.close("the View asked");
      const ready = new Promise((resolve) => (bridge.oninitialized = resolve));
      bridge.onsandboxready = () => {
        bridge.sendSandboxResourceReady({ html, csp: ui.csp, permissions: ui.permissions });
      };
      const themeChanged = () => bridge.setHostContext({ ...context, theme: this.host.theme() });
      document.addEventListener("console-theme", themeChanged);
      let closed = false;
      view.close = async (reason) => {
        if (closed) return;
        closed = true;
        document.removeEventListener("console-theme", themeChanged);
        await Promise.race([bridge.teardownResource({ reason }).catch(() => {}), new Promise((r) => setTimeout(r, 1000))]);
        await bridge.close().catch(() => {});
        panel.remove();
        this.open.delete(view);
      };
      await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
      const query = ui.csp ? `?csp=${encodeURIComponent(JSON.stringify(ui.csp))}` : "";
      iframe.src = `${this.host.viewOrigin}/sandbox${query}`;
      await ready;
      status.textContent = "";
      panel.dataset.ready = "1";
      await bridge.sendToolInput({ arguments: args });
      result.then(
        (value) => !closed && bridge.sendToolResult(value),
        (error) => !closed && bridge.sendToolCancelled({ reason: error.message || String(error) }),
      );
    } catch (error) {
      status.textContent = `The View could not be shown: ${error.message || error}`;
      status.classList.add("error");
    }
  }
}
