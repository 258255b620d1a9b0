// The console: an AHP client in the page. It initializes with `capabilities.mcpApps`,
// subscribes to the root, the default session and the harness chat, keeps a mirror by
// applying the actions it receives (mirror.js), and renders it. Steering goes out as
// `dispatchAction` and `authenticate`, MCP Apps over `mcp://` channels: only what any AHP
// client can do.

import { Connection } from "./connection.js";
import { applyRoot, applySession, applyChat, findServer } from "./mirror.js";
import { Tree } from "./tree.js";
import { Activity } from "./activity.js";
import { Apps } from "./apps.js";
import { h, fill } from "./dom.js";

const ROOT = "ahp-root://";
const SESSION = "ahp-session:/default";
const CHAT = "ahp-chat:/harness";

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content;
const viewPort = meta("ahp-console-view-port");
const tokenRequired = meta("ahp-console-token-required") === "true";

const stats = { firstRenderMs: undefined, updates: [], lastUpdateMs: undefined, actions: 0, resyncs: 0 };
const mirror = { root: undefined, session: undefined, chat: undefined, serverSeq: 0 };
const clientId = `console-${crypto.randomUUID ? crypto.randomUUID() : Math.random().toString(36).slice(2)}`;

let connection;
let clientSeq = 0;

const status = document.getElementById("status");
const tree = new Tree(document.getElementById("tree"), {
  toggle: (c, enabled) => dispatch({ type: "session/customizationToggled", id: c.id, enablement: [{ kind: "session", enabled }] }),
  start: (id) => dispatch({ type: "session/mcpServerStartRequested", id }),
  stop: (id) => dispatch({ type: "session/mcpServerStopRequested", id }),
  restart: (id) => restart(id),
  authenticate: (resource, token, scopes) => authenticate(resource, token, scopes),
  apps: (server) => apps.section(server),
  toolCount: (server) => toolCounts.get(server.channel),
});
const activity = new Activity(document.getElementById("activity"), {
  server: (id) => tree.describe(id),
  giveUp: (turnId, toolCallId) =>
    dispatch(
      { type: "chat/toolCallComplete", turnId, toolCallId, result: { success: false, pastTenseMessage: "Given up in the console", error: { message: "the user gave up waiting for authorization" } } },
      CHAT,
    ),
  authenticate: (resource, token, scopes) => authenticate(resource, token, scopes),
  openView: (tc) => {
    const entry = tree.describe(tc.contributor.customizationId);
    if (entry) apps.showCall(entry.server, tc);
  },
});
const apps = new Apps(document.getElementById("views"), {
  request: (method, params) => connection.request(method, params),
  notify: (method, params) => connection.notify(method, params),
  viewOrigin: `${location.protocol}//${location.hostname.includes(":") ? `[${location.hostname}]` : location.hostname}:${viewPort}`,
  theme: () => currentTheme(),
});
const toolCounts = new Map(); // channel → number of tools

// ─── theme ──────────────────────────────────────────────────────────────────

function currentTheme() {
  const chosen = document.documentElement.dataset.theme;
  if (chosen === "light" || chosen === "dark") return chosen;
  return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

document.getElementById("theme").addEventListener("click", () => {
  document.documentElement.dataset.theme = currentTheme() === "dark" ? "light" : "dark";
  localStorage.setItem("ahp-console-theme", document.documentElement.dataset.theme);
  document.dispatchEvent(new Event("console-theme"));
});
const savedTheme = localStorage.getItem("ahp-console-theme");
if (savedTheme) document.documentElement.dataset.theme = savedTheme;

// ─── the token ──────────────────────────────────────────────────────────────

function takeToken() {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get("token");
  if (fromUrl) {
    sessionStorage.setItem("ahp-console-token", fromUrl);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem("ahp-console-token");
}

function askForToken(message) {
  const input = h("input", { type: "password", autocomplete: "current-password", "aria-label": "Access token", required: true });
  const form = h(
    "form",
    {
      class: "login",
      onsubmit: (event) => {
        event.preventDefault();
        sessionStorage.setItem("ahp-console-token", input.value);
        start();
      },
    },
    h("p", {}, message),
    h("label", {}, "Access token ", input),
    h("button", { type: "submit" }, "Connect"),
  );
  fill(status, form);
  input.focus();
}

// ─── connection and mirror ──────────────────────────────────────────────────

function say(text, kind = "info") {
  fill(status, h("span", { class: `status-${kind}` }, text));
}

async function start() {
  const token = takeToken();
  if (tokenRequired && !token) {
    askForToken("This proxy needs its access token.");
    return;
  }
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const url = `${scheme}//${location.host}/${token ? `?token=${encodeURIComponent(token)}` : ""}`;
  connection = new Connection(url, onNotification, onClose);
  say("Connecting…");
  try {
    await connection.open();
  } catch (error) {
    if (tokenRequired) askForToken("The proxy refused the connection: check the token.");
    else say(`Cannot reach the proxy (${error.message}); retrying…`, "error");
    if (!tokenRequired) setTimeout(start, 2000);
    return;
  }
  try {
    const result = await connection.request("initialize", {
      channel: ROOT,
      clientId,
      protocolVersions: ["1.0.0"],
      clientInfo: { name: "ahp-proxy console", version: "1" },
      capabilities: { mcpApps: {} },
      initialSubscriptions: [ROOT, SESSION, CHAT],
    });
    mirror.serverSeq = result.serverSeq;
    for (const snapshot of result.snapshots || []) take(snapshot);
    say("Connected", "ok");
    renderAll();
  } catch (error) {
    say(`initialize failed: ${error.message}`, "error");
  }
}

function onClose(event) {
  say(`Disconnected (${event.code}${event.reason ? `: ${event.reason}` : ""}); reconnecting…`, "error");
  setTimeout(start, 1000);
}

function take(snapshot) {
  if (snapshot.resource === ROOT) mirror.root = snapshot.state;
  else if (snapshot.resource === SESSION) mirror.session = snapshot.state;
  else if (snapshot.resource === CHAT) mirror.chat = snapshot.state;
}

/** Take a fresh snapshot of `channel` (after an action this mirror cannot apply). */
async function resync(channel) {
  stats.resyncs += 1;
  const result = await connection.request("subscribe", { channel });
  if (result && result.snapshot) take(result.snapshot);
  renderAll();
}

function onNotification(method, params, arrived) {
  if (method !== "action") return;
  const envelope = params;
  if (envelope.rejectionReason) {
    say(`Refused: ${envelope.rejectionReason}`, "error");
    return;
  }
  mirror.serverSeq = Math.max(mirror.serverSeq, envelope.serverSeq || 0);
  stats.actions += 1;
  const action = envelope.action;
  let outcome = "unknown";
  if (envelope.channel === ROOT && mirror.root) outcome = applyRoot(mirror.root, action);
  else if (envelope.channel === SESSION && mirror.session) outcome = applySession(mirror.session, action);
  else if (envelope.channel === CHAT && mirror.chat) outcome = applyChat(mirror.chat, action);
  else return;
  if (outcome === "unknown") {
    resync(envelope.channel);
    return;
  }
  if (outcome === "applied") render(envelope.channel, action);
  // An update is done when it is on screen: the next frame after the DOM changed.
  requestAnimationFrame(() => {
    const ms = performance.now() - arrived;
    stats.lastUpdateMs = ms;
    stats.updates.push({ type: action.type, ms });
    if (stats.updates.length > 200) stats.updates.shift();
  });
}

function renderAll() {
  renderHeader();
  if (mirror.session) tree.render(mirror.session.customizations);
  if (mirror.chat) activity.render(mirror.chat);
  refreshToolCounts();
  if (stats.firstRenderMs === undefined) {
    requestAnimationFrame(() => {
      stats.firstRenderMs = performance.now();
      document.body.dataset.rendered = "1";
    });
  }
}

function renderHeader() {
  const agent = mirror.root && mirror.root.agents && mirror.root.agents[0];
  document.getElementById("agent").textContent = agent ? agent.displayName : "";
  document.getElementById("session").textContent = mirror.session ? mirror.session.title : "";
}

function render(channel, action) {
  if (channel === CHAT) {
    activity.render(mirror.chat);
    return;
  }
  if (channel === ROOT) {
    renderHeader();
    return;
  }
  const session = mirror.session;
  switch (action.type) {
    case "session/customizationsChanged":
      tree.render(session.customizations);
      refreshToolCounts();
      break;
    case "session/customizationUpdated": {
      const c = session.customizations.find((x) => x.id === action.customization.id);
      if (c) tree.container(c);
      refreshToolCounts();
      break;
    }
    case "session/customizationRemoved":
    case "session/customizationToggled": {
      const top = session.customizations.find((x) => x.id === action.id);
      if (top) tree.container(top);
      else if (action.type === "session/customizationRemoved") {
        tree.remove(action.id);
        const parent = session.customizations.find((x) => tree.cards.get(x.id)?.querySelector(`[data-id="${CSS.escape(action.id)}"]`));
        if (parent) tree.container(parent);
      } else {
        const parent = session.customizations.find((x) => (x.children || []).some((c) => c.id === action.id));
        if (parent) tree.container(parent);
      }
      break;
    }
    case "session/mcpServerStateChanged":
    case "session/mcpServerStartRequested":
    case "session/mcpServerStopRequested":
    case "session/mcpServerBackgroundRequested": {
      const server = findServer(session, action.id);
      if (!server) break;
      const container = session.customizations.find((x) => x === server || (x.children || []).includes(server));
      if (container === server) tree.container(server);
      else tree.server(server, container);
      if (server.state.kind === "ready") countTools(server);
      break;
    }
    case "session/titleChanged":
      renderHeader();
      break;
    default:
      break;
  }
}

// ─── steering ───────────────────────────────────────────────────────────────

/** `dispatchAction` is a notification: the answer is the action's echo (or its rejection). */
function dispatch(action, channel = SESSION) {
  clientSeq += 1;
  connection.notify("dispatchAction", { channel, clientSeq, action });
}

function restart(id) {
  dispatch({ type: "session/mcpServerStopRequested", id });
  const started = Date.now();
  const poll = () => {
    const server = mirror.session && findServer(mirror.session, id);
    if (server && server.state.kind === "stopped") dispatch({ type: "session/mcpServerStartRequested", id });
    else if (Date.now() - started < 30000) setTimeout(poll, 50);
  };
  poll();
}

async function authenticate(resource, token, scopes) {
  try {
    await connection.request("authenticate", { channel: ROOT, resource, token, ...(scopes && scopes.length ? { scopes } : {}) });
    say(`Token sent for ${resource}`, "ok");
  } catch (error) {
    say(`authenticate failed: ${error.message}`, "error");
  }
}

// ─── tool counts (tools/list on each ready server's channel) ────────────────

function allServers() {
  const out = [];
  for (const c of (mirror.session && mirror.session.customizations) || []) {
    if (c.type === "mcpServer") out.push({ server: c, container: c });
    for (const child of c.children || []) if (child.type === "mcpServer") out.push({ server: child, container: c });
  }
  return out;
}

function refreshToolCounts() {
  for (const { server } of allServers()) if (server.state && server.state.kind === "ready") countTools(server);
}

function countTools(server) {
  const channel = server.channel;
  if (!channel || toolCounts.has(channel)) return;
  apps.tools(server).then(
    (tools) => {
      toolCounts.set(channel, tools.length);
      const current = mirror.session && findServer(mirror.session, server.id);
      if (current && current.channel === channel) {
        const container = mirror.session.customizations.find((x) => x === current || (x.children || []).includes(current));
        if (container === current) tree.container(current);
        else tree.server(current, container);
      }
    },
    () => {},
  );
}

// For tests and the curious: the mirror, and how fast the page was.
window.ahpConsole = {
  mirror,
  stats,
  clientId,
  snapshot: () => JSON.parse(JSON.stringify({ root: mirror.root, session: mirror.session, chat: mirror.chat })),
};

start();
