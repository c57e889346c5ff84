#!/usr/bin/env node
'use strict';
// agent-browser path: the agent-browser CLI (a native binary shipped inside the npm package) as an
// agent calls it, one command per op with --json. Its first command starts the CLI's daemon,
// which holds the CDP connection to the runner's engine between commands. Every attempt gets a
// private HOME (so no user config is read and its sockets live in a temporary directory), its own
// session, a fresh tab it closes again, and a `close` that ends the daemon; the engine is never
// closed (`close` of a CDP-attached session only disconnects).

const { execFile } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { main, poll, sleep, localOps, urlMatches, digestFile, elementNow, elementReads } = require('./common');

// Dialog ops make the attempt's daemon leave every dialog to the adapter (no auto-accepted alert):
// the whole session must run with the same option, so it is decided from the task's ops.
const DIALOG_OPS = new Set(['on_dialog', 'get_dialogs']);

const VERSION = require('agent-browser/package.json').version;
const CLI_GRACE_MS = 2000; // a CLI call may outlive its action timeout by this much, then is killed
const RELOAD_GRACE_MS = 15000; // what a reload may take past the action limit (the reference's allowance)

function nativeBinary() {
  const arch = { x64: 'x64', arm64: 'arm64' }[os.arch()];
  const file = path.join(path.dirname(require.resolve('agent-browser/package.json')), 'bin', `agent-browser-linux-${arch}`);
  if (os.platform() !== 'linux' || !arch) throw new Error(`no agent-browser binary for ${os.platform()}-${os.arch()}`);
  fs.accessSync(file, fs.constants.X_OK); // npm ci --ignore-scripts leaves it 0644; make install sets +x
  return file;
}

// One CLI command; its JSON reply's data, or an Error carrying the CLI's own message.
// Every command names the engine (--cdp) and carries the same environment: the CLI restarts its
// daemon when a command's options differ from the daemon's, and a daemon started without --cdp
// launches a browser of its own. A wait longer than the op's share of the budget is cut by
// killing the command (the daemon's own action timeout is fixed for the session).
function ab(session, args, budget, limitMs) {
  const wait = budget.wait(limitMs);
  session.metrics.cli_call_count += 1;
  return new Promise((resolve, reject) => {
    execFile(session.binary, ['--json', '--cdp', session.endpoint, ...args], { env: session.env, timeout: wait + CLI_GRACE_MS, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (stderr) process.stderr.write(stderr);
        let reply = null;
        try { reply = JSON.parse(stdout); } catch (e) { /* judged below */ }
        const lifecycle = reply && reply.data && reply.data.lifecycle;
        if (lifecycle && lifecycle.restartedBackground) session.metrics.daemon_restarts += 1; // state lost
        if (reply && reply.success) return resolve(reply.data || {});
        session.metrics.cli_error_count += 1;
        if (reply && reply.error) return reject(new Error(String(reply.error)));
        const why = error && error.killed ? `killed after ${wait + CLI_GRACE_MS} ms` : (error ? error.message : 'no JSON reply');
        return reject(new Error(`agent-browser ${args[0]}: ${why}`));
      });
  });
}

async function connect(payload, budget) {
  const binary = nativeBinary();
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'mw-ab-'));
  const name = `a${payload.attempt || 0}`;
  const env = {
    ...process.env, HOME: home, AGENT_BROWSER_SESSION: name, AGENT_BROWSER_IDLE_TIMEOUT_MS: '15000',
    AGENT_BROWSER_DEFAULT_TIMEOUT: String(payload.action_timeout_ms || 8000),
    ...((payload.steps || []).some((step) => DIALOG_OPS.has(step.op)) ? { AGENT_BROWSER_NO_AUTO_DIALOG: '1' } : {}),
  };
  for (const key of Object.keys(env)) if (/^(http|https|all)_proxy$/i.test(key)) delete env[key];
  const session = { binary, env, home, name, endpoint: payload.browser_ws, tabs: [], dialogs: [], metrics: { cli_call_count: 0, cli_error_count: 0, daemon_restarts: 0, fresh_tab: true } };
  try {
    await ab(session, ['connect', payload.browser_ws], budget, payload.connect_timeout_ms || 15000);
    await freshTab(session, budget);
  } catch (e) {
    await close(session);
    throw e;
  }
  return session;
}

// The attempt's own tab, which the first new_page takes. An engine with a single page
// (Lightpanda: TargetAlreadyLoaded) keeps the tab the CLI attached to on connect; the result's
// metrics say so.
async function freshTab(session, budget) {
  try {
    session.tabs.push((await ab(session, ['tab', 'new'], budget)).tabId);
  } catch (e) {
    process.stderr.write(`tab new: ${e.message}; using the attached tab\n`);
    session.metrics.fresh_tab = false;
  }
  session.pending = true;
}

// The CLI exposes no raw CDP. Its live gate is twofold: the endpoint its daemon holds must be
// browser_ws (a user agent cannot tell two Chromium instances of one build apart, and a daemon
// restarted without --cdp launched a Chrome of its own), and navigator.userAgent through it must
// be the one /json/version reported, as for chrome-devtools-mcp.
async function liveProblem(session, payload, version) {
  const budget = { wait: (ms) => ms || 8000 };
  const held = (await ab(session, ['get', 'cdp-url'], budget)).cdpUrl;
  if (held !== payload.browser_ws) return `daemon holds ${JSON.stringify(held)}, not browser_ws ${payload.browser_ws}`;
  const ua = (await ab(session, ['eval', 'navigator.userAgent'], budget)).result;
  if (version['User-Agent'] && ua !== version['User-Agent']) return `live navigator.userAgent ${JSON.stringify(ua)} != /json/version User-Agent`;
  return null;
}

async function close(session) {
  const budget = { wait: () => 5000 };
  for (const tab of session.tabs) {
    try { await ab(session, ['tab', 'close', tab], budget); } catch (e) { process.stderr.write(`tab close ${tab}: ${e.message}\n`); }
  }
  const daemon = daemonPid(session);
  try { await ab(session, ['close'], budget); } catch (e) { process.stderr.write(`close: ${e.message}\n`); }
  if (daemon) await daemonGone(daemon);
  fs.rmSync(session.home, { recursive: true, force: true });
}

function daemonPid(session) {
  try { return Number(fs.readFileSync(path.join(session.home, '.agent-browser', `${session.name}.pid`), 'utf8').trim()) || null; } catch (e) { return null; }
}

// `close` answers before the daemon has exited; the attempt ends only once it is gone, so the
// runner never finds it left behind (a daemon that will not go is killed). After its answer the
// daemon idles ~100 ms, then removes its socket and pid files and exits (strace, agent-browser
// 0.31.1): SIGTERM has it do that at once (gone in 0.2-2.5 ms, the same files removed), so the
// attempt does not carry 100 ms of an idle daemon's timer, which the peer's attempt never waits for.
async function daemonGone(pid) {
  const alive = () => {
    try { return !/^\S+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')); } catch (e) { return false; }
  };
  if (alive()) { try { process.kill(pid, 'SIGTERM'); } catch (e) { /* already gone */ } }
  const end = Date.now() + 3000;
  while (alive() && Date.now() < end) await sleep(20);
  if (alive()) { try { process.kill(pid, 'SIGKILL'); } catch (e) { /* already gone */ } }
}

// A command that may meet a dialog: once the task set a policy, a pending dialog is answered
// (and recorded) before the command and after it.
async function ab2(s, args, budget, limitMs) {
  if (s.dialogPolicy) await answerDialog(s, budget);
  let data;
  try {
    data = await ab(s, args, budget, limitMs);
  } catch (e) {
    // the CLI refuses a command while a dialog blocks the page: answer it, then run it again
    if (!s.dialogPolicy || !/dialog is blocking the page/.test(e.message) || !(await answerDialog(s, budget))) throw e;
    data = await ab(s, args, budget, limitMs);
  }
  if (s.dialogPolicy) await answerDialog(s, budget);
  return data;
}

async function answerDialog(s, budget) {
  const status = await ab(s, ['dialog', 'status'], budget);
  const dialog = status.dialog || status;
  if (!status.pending && !dialog.pending && !dialog.message) return false;
  s.dialogs.push(`${dialog.type || 'dialog'}:${dialog.message}`);
  const policy = s.dialogPolicy;
  await ab(s, policy.action === 'accept' ? ['dialog', 'accept', ...(policy.text !== undefined ? [String(policy.text)] : [])] : ['dialog', 'dismiss'], budget);
  return true;
}

const run = (args) => (s, step, state) => ab2(s, args(step), state.budget, step.timeout_ms);
const value = (field, args) => async (s, step, state) => (await ab2(s, args(step), state.budget, step.timeout_ms))[field];
const evaluate = async (s, expression, budget, limitMs) => (await ab2(s, ['eval', expression], budget, limitMs)).result;
// Reads act on the page as it is now: an element that is not there fails at once.
const read = (expression) => (s, step, state) => evaluate(s, elementNow(step.selector, expression), state.budget, step.timeout_ms);

const ops = {
  ...localOps(),
  new_page: async (s, step, state) => {
    if (s.pending) { s.pending = false; return 'page'; }
    s.tabs.push((await ab(s, ['tab', 'new'], state.budget)).tabId);
    return 'page';
  },
  close_page: async (s, step, state) => {
    const tab = s.tabs.pop();
    if (tab === undefined) throw new Error('no page to close');
    await ab(s, ['tab', 'close', tab], state.budget);
    if (s.tabs.length) await ab(s, ['tab', s.tabs[s.tabs.length - 1]], state.budget);
    return 'closed';
  },
  goto: value('url', (step) => ['open', step.url]),
  // The CLI's reload may wait long for a load event an engine sends late (Lightpanda): as the
  // reference adapter does, it gets the action limit + 15 s, then the new document is awaited
  // (a marker set before the reload must be gone and the document complete).
  reload: async (s, step, state) => {
    await evaluate(s, 'window.__mw_reload = 1', state.budget);
    const reloaded = await ab2(s, ['reload'], state.budget, (step.timeout_ms || state.budget.actionMs) + RELOAD_GRACE_MS);
    await poll(state.budget, step.timeout_ms, async () => !!(await evaluate(s, "document.readyState === 'complete' && !window.__mw_reload", state.budget)), 'reload to settle');
    return reloaded.url;
  },
  go_back: value('url', () => ['back']),
  go_forward: value('url', () => ['forward']),
  click: async (s, step, state) => {
    for (let i = 0; i < (step.times || 1); i += 1) await ab2(s, ['click', step.selector], state.budget, step.timeout_ms);
    // a dialog the click's own handlers open a moment later is answered before the next command
    // (a command it blocks mid-way would wait for the CLI's timeout)
    for (let i = 0; s.dialogPolicy && i < 4 && !(await answerDialog(s, state.budget)); i += 1) await sleep(50);
    return step.selector;
  },
  hover: async (s, step, state) => { await run((x) => ['hover', x.selector])(s, step, state); return step.selector; },
  fill: async (s, step, state) => { await run((x) => ['fill', x.selector, x.value])(s, step, state); return step.value; },
  type: async (s, step, state) => { await run((x) => ['type', x.selector, x.value ?? x.text])(s, step, state); return step.value ?? step.text; },
  check: async (s, step, state) => { await run((x) => ['check', x.selector])(s, step, state); return true; },
  uncheck: async (s, step, state) => { await run((x) => ['uncheck', x.selector])(s, step, state); return false; },
  focus: async (s, step, state) => { await run((x) => ['focus', x.selector])(s, step, state); return step.selector; },
  press: async (s, step, state) => {
    if (step.selector) await ab2(s, ['focus', step.selector], state.budget, step.timeout_ms);
    await ab2(s, ['press', step.key], state.budget, step.timeout_ms);
    return step.key;
  },
  keyboard_type: async (s, step, state) => { await ab2(s, ['keyboard', 'type', step.text], state.budget); return step.text; },
  select_option: async (s, step, state) => { await run((x) => ['select', x.selector, x.value])(s, step, state); return step.value; },
  ...elementReads(read),
  is_visible: value('visible', (step) => ['is', 'visible', step.selector]),
  count: value('count', (step) => ['get', 'count', step.selector]),
  url: value('url', () => ['get', 'url']),
  title: value('title', () => ['get', 'title']),
  content: (s, step, state) => evaluate(s, 'document.documentElement.outerHTML', state.budget),
  evaluate: (s, step, state) => evaluate(s, step.expression, state.budget, step.timeout_ms),
  user_agent: (s, step, state) => evaluate(s, 'navigator.userAgent', state.budget),
  wait_for_selector: async (s, step, state) => {
    const args = step.state === 'hidden' || step.state === 'detached' ? ['--state', 'hidden'] : [];
    await ab2(s, ['wait', step.selector, ...args], state.budget, step.timeout_ms);
    return true;
  },
  wait_for_function: async (s, step, state) => {
    await poll(state.budget, step.timeout_ms, async () => !!(await evaluate(s, step.expression, state.budget)), step.expression);
    return true;
  },
  wait_ms: async (s, step, state) => { await ab(s, ['wait', String(Math.min(step.ms || 0, state.budget.remaining()))], state.budget); return step.ms; },
  route_fulfill: async (s, step, state) => {
    if (step.status && step.status !== 200) throw new Error(`network route answers 200 only, not ${step.status}`);
    await ab(s, ['network', 'route', step.pattern, '--body', step.body == null ? '' : String(step.body)], state.budget);
    return step.pattern;
  },
  route_abort: async (s, step, state) => { await ab(s, ['network', 'route', step.pattern, '--abort'], state.budget); return step.pattern; },
  set_extra_headers: async (s, step, state) => { await ab(s, ['set', 'headers', JSON.stringify(step.headers)], state.budget); return Object.keys(step.headers).join(','); },
  record_requests: async (s, step, state) => { await ab(s, ['network', 'requests', '--clear'], state.budget); s.recording = step.pattern || '**'; return 'recording'; },
  get_recorded_requests: async (s, step, state) => {
    const data = await ab(s, ['network', 'requests'], state.budget);
    const requests = data.requests || data.entries || [];
    return requests.filter((r) => urlMatches(r.url, s.recording)).map((r) => `${r.method} ${r.url}`).join('\n');
  },
  get_console: async (s, step, state) => {
    const data = await ab(s, ['console'], state.budget);
    return (data.messages || data.logs || []).map((m) => `${m.type || m.level}:${m.text}`).join('\n');
  },
  on_dialog: (s, step) => { s.dialogPolicy = { action: step.action || 'accept', text: step.text }; return step.action || 'accept'; },
  get_dialogs: async (s, step, state) => { await answerDialog(s, state.budget); return s.dialogs.join('\n'); },
  set_input_files: async (s, step, state) => { await ab2(s, ['upload', step.selector, step.path], state.budget, step.timeout_ms); return step.path; },
  download: async (s, step, state) => { await ab2(s, ['download', step.selector, step.path], state.budget, step.timeout_ms); return digestFile(step.path); },
  set_cookie: async (s, step, state) => { await ab(s, ['cookies', 'set', step.name, String(step.value ?? ''), '--url', step.url], state.budget); return step.name; },
  get_cookies: async (s, step, state) => {
    const data = await ab(s, ['cookies', 'get'], state.budget);
    return data.cookies || data;
  },
  // agent-browser's own observation surface: its text snapshot with refs (as an agent sees it).
  ax_snapshot: value('snapshot', () => ['snapshot']),
  aria_snapshot: value('snapshot', (step) => ['snapshot', '-s', step.selector]),
};

// agent_browser_tool.js (the tool-probe subset) reuses the safe CLI invocation and session.
// the CLI's `tab new` opens its tab in the engine's default context
if (require.main === module) main({ key: 'agent_browser', name: `agent-browser ${VERSION}`, connect, liveProblem, close, ops, isolations: ['shared'] });

module.exports = { VERSION, ab, connect, liveProblem, close };
