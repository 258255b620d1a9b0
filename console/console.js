// The console: an AHP client in the page. It initializes with `capabilities.mcpApps`,
// subscribes to the root, the default session and the harness chat, keeps a mirror by
// applying the actions it receives (mirror.js), and renders it. Steering goes out as
// `dispatchAction` and `authenticate`; every server's offer, the workbench's calls and MCP
// Apps go over `mcp://` channels: only what any AHP client can do.

import { Connection } from "./connection.js";
import { applyRoot, applySession, applyChat, findServer } from "./mirror.js";
import { Tree } from "./tree.js";
import { Activity } from "./activity.js";
import { Apps } from "./apps.js";
import { Offers } from "./offers.js";
import { Workbench } from "./workbench.js";
import { Summary } from "./summary.js";
import { Filter } from "./filter.js";
import { Charts } from "./chart.js";
import { Approvals } from "./approvals.js";
import { h, fill, announce } from "./dom.js";

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content;

const ROOT = "ahp-root://";
// The session as the host publishes it (`<provider>:/default`).
const SESSION = meta("ahp-console-session") || "ahp-proxy:/default";
const CHAT = "ahp-chat:/harness";
const viewPort = meta("ahp-console-view-port");
const tokenRequired = meta("ahp-console-token-required") === "true";

const stats = { firstRenderMs: undefined, updates: [], lastUpdateMs: undefined, actions: 0, resyncs: 0, filters: [] };
const mirror = { root: undefined, session: undefined, chat: undefined, serverSeq: 0 };
const clientId = `console-${crypto.randomUUID ? crypto.randomUUID() : Math.random().toString(36).slice(2)}`;

let connection;
let clientSeq = 0;

const status = document.getElementById("status");
const request = (method, params) => connection.request(method, params);
/** Server `id` as the mirror has it now. */
const current = (id) => mirror.session && findServer(mirror.session, id);

const offers = new Offers({ request, changed: (id) => offerChanged(id) });
const apps = new Apps(document.getElementById("views"), {
  request,
  notify: (method, params) => connection.notify(method, params),
  tools: (server) => (offers.of(server) || {}).tools,
  viewOrigin: `${location.protocol}//${location.hostname.includes(":") ? `[${location.hostname}]` : location.hostname}:${viewPort}`,
  theme: () => currentTheme(),
});
const workbench = new Workbench({ offers, request, current, apps });
const tree = new Tree(document.getElementById("tree"), {
  toggle: (c, enabled) => dispatch({ type: "session/customizationToggled", id: c.id, enablement: [{ kind: "session", enabled }] }),
  start: (id) => dispatch({ type: "session/mcpServerStartRequested", id }),
  stop: (id) => dispatch({ type: "session/mcpServerStopRequested", id }),
  restart: (id) => restart(id),
  authenticate: (resource, token, scopes) => authenticate(resource, token, scopes),
  offer: (server) => workbench.section(server),
  toolCount: (server) => {
    const tools = (offers.of(server) || {}).tools;
    return tools && tools.length;
  },
});
const activity = new Activity(document.getElementById("activity"), {
  clientId,
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
const charts = new Charts(document.getElementById("charts"), { server: (id) => tree.describe(id), jump: (id) => jump(id) });
const filter = new Filter(document.getElementById("filter"), {
  customizations: () => (mirror.session && mirror.session.customizations) || [],
  tools: (server) => ((offers.of(server) || {}).tools || []).map((t) => t.name),
  tree,
  workbench,
  stats,
});
const summary = new Summary(document.getElementById("summary"), document.getElementById("attention"), {
  filter: (query) => {
    filter.set(query);
    const first = document.querySelector(query.startsWith("state:") ? "#tree .card:not([hidden]) .server:not([hidden])" : "#tree .card:not([hidden])");
    if (first) tree.reveal(first.dataset.id);
  },
  jump: (id) => jump(id),
  approvals: () => {
    const first = document.querySelector("#approvals .approval .approve");
    document.getElementById("approvals").scrollIntoView({ block: "start" });
    if (first) first.focus({ preventScroll: true });
  },
});
const approvals = new Approvals(document.getElementById("approvals"), {
  clientId,
  server: (id) => tree.describe(id),
  decide: (channel, action) => dispatch(action, channel),
});

/** Bring server or container `id` into sight, clearing a filter that hides it. */
function jump(id) {
  const target = tree.rows.get(id) || tree.cards.get(id);
  if (target && (target.hidden || target.closest("[hidden]"))) filter.set("");
  tree.reveal(id);
}

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
        fill(document.getElementById("login"));
        start();
      },
    },
    h("p", {}, message),
    h("label", {}, "Access token ", input),
    h("button", { type: "submit" }, "Connect"),
  );
  fill(document.getElementById("login"), form);
  say("Not connected", "error");
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
    offers.reset();
    workbench.reset();
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
  if (/^notifications\/(tools|resources|prompts)\/list_changed$/.test(method)) {
    offers.listChanged(params.channel, method);
    return;
  }
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
  if (mirror.session) {
    tree.render(mirror.session.customizations);
    for (const { server } of allServers()) {
      announced.set(server.id, server.state && server.state.kind);
      if (server.state && server.state.kind === "ready") offers.load(server);
    }
    sessionChanged();
  }
  if (mirror.chat) {
    activity.render(mirror.chat);
    charts.render(mirror.chat);
  }
  if (stats.firstRenderMs === undefined) {
    requestAnimationFrame(() => {
      stats.firstRenderMs = performance.now();
      document.body.dataset.rendered = "1";
    });
  }
}

/** After the session changed: the calls waiting for approval, the summary, the attention
 *  list, the filter. */
function sessionChanged() {
  const pending = approvals.render(mirror.session);
  summary.render(mirror.session.customizations, pending);
  filter.refresh();
}

function renderHeader() {
  const agent = mirror.root && mirror.root.agents && mirror.root.agents[0];
  document.getElementById("where").textContent = [agent && agent.displayName, mirror.session && mirror.session.title].filter(Boolean).join(" · ");
}

const STATE_WORDS = { ready: "ready", starting: "starting", stopped: "stopped", error: "error", authRequired: "needs a token" };
/** The state last announced for each server (a stop's request and its report say it once). */
const announced = new Map();

function render(channel, action) {
  if (channel === CHAT) {
    activity.render(mirror.chat);
    charts.render(mirror.chat);
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
      for (const { server } of allServers()) if (server.state.kind === "ready") offers.load(server);
      break;
    case "session/customizationUpdated": {
      const c = session.customizations.find((x) => x.id === action.customization.id);
      if (c) tree.container(c);
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
      if (server.state.kind === "ready") offers.load(server);
      else offers.drop(server.id);
      redrawServer(server);
      if (announced.get(server.id) !== server.state.kind) {
        announced.set(server.id, server.state.kind);
        const error = server.state.kind === "error" && server.state.error ? ` (${server.state.error.errorType || "error"})` : "";
        announce(`${server.name}: ${STATE_WORDS[server.state.kind] || server.state.kind}${error}`);
      }
      break;
    }
    case "session/titleChanged":
      renderHeader();
      break;
    default:
      break;
  }
  sessionChanged();
}

/** Redraw server `server`'s row (or its card, when it stands alone). */
function redrawServer(server) {
  const container = mirror.session.customizations.find((x) => x === server || (x.children || []).includes(server));
  if (container === server) tree.container(server);
  else if (container) tree.server(server, container);
}

/** A list of server `id` was read: its row (tool count), its offer, the filter follow. */
function offerChanged(id) {
  const server = current(id);
  if (!server || server.state.kind !== "ready") return;
  redrawServer(server);
  filter.refresh();
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
    const server = current(id);
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

function allServers() {
  const out = [];
  for (const c of (mirror.session && mirror.session.customizations) || []) {
    if (c.type === "mcpServer") out.push({ server: c, container: c });
    for (const child of c.children || []) if (child.type === "mcpServer") out.push({ server: child, container: c });
  }
  return out;
}

// For tests and the curious: the mirror, and how fast the page was.
window.ahpConsole = {
  mirror,
  stats,
  clientId,
  snapshot: () => JSON.parse(JSON.stringify({ root: mirror.root, session: mirror.session, chat: mirror.chat })),
};

start();
