#!/usr/bin/env node
'use strict';
// chrome-devtools-mcp path: the adapter is an MCP client. It starts the MCP server
// (`--wsEndpoint`: connect-only, it never launches a browser) as its child and speaks MCP
// JSON-RPC over the server's stdio; every op is one or more of the server's own tools.
// Selectors become element uids through a verbose `take_snapshot` plus one `evaluate_script`
// that compares every snapshot uid's element with the selector's.

const { spawn } = require('child_process');
const { main, poll, localOps, urlMatches, elementNow, elementReads } = require('./common');

const SERVER = require.resolve('chrome-devtools-mcp/build/src/bin/chrome-devtools-mcp.js');
const VERSION = require('chrome-devtools-mcp/package.json').version;
const NOT_ELEMENTS = new Set(['InlineTextBox', 'StaticText', 'ListMarker', 'ignored']);

function startServer(wsEndpoint) {
  const child = spawn(process.execPath, [SERVER, '--wsEndpoint', wsEndpoint, '--usageStatistics=false', '--performanceCrux=false'], {
    stdio: ['pipe', 'pipe', 'inherit'],
    // No usage statistics and no update check (it spawns a detached process that asks the npm registry).
    env: { ...process.env, CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS: '1', CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS: '1' },
  });
  const rpc = { child, pending: new Map(), next: 0, buffer: '', exited: null };
  child.stdout.on('data', (data) => {
    rpc.buffer += data;
    let end;
    while ((end = rpc.buffer.indexOf('\n')) >= 0) {
      const line = rpc.buffer.slice(0, end);
      rpc.buffer = rpc.buffer.slice(end + 1);
      let message;
      try { message = JSON.parse(line); } catch (e) { continue; }
      const waiter = rpc.pending.get(message.id);
      if (waiter) { rpc.pending.delete(message.id); waiter(message); }
    }
  });
  child.on('exit', (code, signal) => {
    rpc.exited = `MCP server exited (${signal || code})`;
    for (const waiter of rpc.pending.values()) waiter({ error: { message: rpc.exited } });
    rpc.pending.clear();
  });
  return rpc;
}

function request(rpc, method, params) {
  if (rpc.exited) return Promise.reject(new Error(rpc.exited));
  rpc.next += 1;
  const id = rpc.next;
  return new Promise((resolve, reject) => {
    rpc.pending.set(id, (m) => (m.error ? reject(new Error(m.error.message)) : resolve(m.result)));
    rpc.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
  });
}

async function tool(session, name, args) {
  for (let tries = 0; ; tries += 1) {
    session.metrics.tool_call_count += 1;
    const result = await request(session.rpc, 'tools/call', { name, arguments: args || {} });
    const text = (result.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    // A tool's answer reports a dialog the page opened; once the task set a policy, it is
    // answered with handle_dialog (and a tool the dialog blocked runs again).
    const answered = name !== 'handle_dialog' && await answerDialog(session, text);
    if (result.isError) {
      session.metrics.tool_error_count += 1;
      if (answered && tries < 3) continue;
      throw new Error(text.split('\n')[0]);
    }
    return text;
  }
}

async function answerDialog(session, text) {
  const open = /# Open dialog\n(\w+): ([\s\S]*?)(?: \(default value: "[^"]*"\))?\.?\n/.exec(`${text}\n`);
  if (!open || !session.dialogPolicy) return false;
  const seen = `${open[1]}:${open[2]}`;
  if (session.dialogs[session.dialogs.length - 1] !== seen) session.dialogs.push(seen);
  const policy = session.dialogPolicy;
  await tool(session, 'handle_dialog', { action: policy.action, ...(policy.text !== undefined ? { promptText: policy.text } : {}) });
  return true;
}

// evaluate_script answers with the JSON of the function's result inside a ```json block.
async function script(session, fn, args) {
  const text = await tool(session, 'evaluate_script', { function: fn, ...(args ? { args } : {}) });
  const match = /```json\n([\s\S]*?)\n```/.exec(text);
  if (!match) throw new Error(`unexpected evaluate_script answer: ${text.slice(0, 200)}`);
  return match[1] === 'undefined' ? undefined : JSON.parse(match[1]);
}

const evaluate = (s, expression) => script(s, `async () => (0, eval)(${JSON.stringify(expression)})`);

// Long-lived (--serve) adapters keep one MCP server per engine endpoint across attempts (its start
// is most of a per-attempt attempt's CPU); each attempt still gets its own isolated browser
// context and pages, closed again at its end. A one-shot adapter's server ends with the attempt.
const SERVING = process.argv.includes('--serve');
const servers = new Map();
let attempts = 0;
process.on('exit', () => { for (const rpc of servers.values()) rpc.child.kill('SIGTERM'); });

function retire(rpc) {
  rpc.child.kill('SIGTERM');
  if (rpc.relay) rpc.relay.close();
}

// A kept server given up: no later attempt is handed it.
function forget(rpc) {
  for (const [ws, kept] of servers) if (kept === rpc) servers.delete(ws);
  retire(rpc);
}

async function server(payload, relayed = false) {
  const kept = servers.get(payload.browser_ws);
  if (kept && !kept.exited) return { rpc: kept, reused: true };
  for (const [ws, old] of servers) { retire(old); servers.delete(ws); } // another engine
  // loaded only here: a per-attempt adapter never needs the relay, nor its WebSocket library
  const relay = relayed ? await require('./cdp_relay').startRelay(payload.browser_ws) : null;
  const rpc = startServer(relay ? relay.url : payload.browser_ws);
  rpc.relay = relay;
  await request(rpc, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'metewand', version: '1' } });
  rpc.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
  if (SERVING) servers.set(payload.browser_ws, rpc);
  return { rpc, reused: false };
}

async function connect(payload) {
  const { rpc, reused } = await server(payload);
  attempts += 1;
  return {
    rpc, pages: [], dialogs: [], metrics: { tool_call_count: 0, tool_error_count: 0, mcp_server_reused: reused },
    context: `metewand-${process.pid}-${attempts}`, // this attempt's own browser context
  };
}

// The server exposes no raw CDP: the live identity is the page's user agent (the peer does the same).
// An engine that starts with no page (Lightpanda) gets the attempt's first page here; the first
// new_page op then takes it instead of opening another.
async function liveProblem(session, payload, version) {
  // the attempt's first page is opened here (in its own context), the first new_page takes it
  try {
    await openPage(session, true);
  } catch (e) {
    // An engine with a single browser context per connection (Lightpanda) still holds the
    // previous attempt's context: the server never disposes of one and the last page cannot be
    // closed. Once per served adapter, the server is started again behind a relay, through which
    // each attempt's end disposes of its context on the server's own connection (`close`).
    if (!session.metrics.mcp_server_reused || !/more than one browser context/i.test(e.message)) throw e;
    const old = servers.get(payload.browser_ws);
    if (old) forget(old);
    session.rpc = (await server(payload, SERVING)).rpc;
    session.metrics.mcp_server_reused = false;
    await openPage(session, true);
  }
  const ua = await evaluate(session, 'navigator.userAgent');
  if (version['User-Agent'] && ua !== version['User-Agent']) return `live navigator.userAgent ${JSON.stringify(ua)} != /json/version User-Agent`;
  return null;
}

async function close(session) {
  for (const pageId of [...session.pages].reverse()) {
    try { await tool(session, 'close_page', { pageId }); } catch (e) { /* the server's last page stays */ }
  }
  if (![...servers.values()].includes(session.rpc)) return stopServer(session.rpc);
  if (session.rpc.relay) await disposeContexts(session.rpc); // kept for the next attempt
}

// The attempt's browser contexts, disposed of on the server's connection (the server made them
// there and no other connection sees them); the engine closes their pages. A server that cannot
// is not kept: the next attempt starts a fresh one.
async function disposeContexts(rpc) {
  try {
    const { browserContextIds } = await rpc.relay.call('Target.getBrowserContexts');
    for (const browserContextId of browserContextIds) {
      await rpc.relay.call('Target.disposeBrowserContext', { browserContextId });
    }
  } catch (e) {
    forget(rpc);
    throw e;
  }
}

// The adapter leaves nothing behind: the one-shot server is waited for, not just signalled (on a
// loaded host a Node server takes longer than the harness's grace to exit after TERM).
const STOP_GRACE_MS = 2000;
function stopServer(rpc) {
  const { child } = rpc;
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const killer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    child.once('exit', () => { clearTimeout(killer); resolve(); });
    child.stdin.end();
    child.kill('SIGTERM');
  });
}

async function openPage(s, forGate) {
  const text = await tool(s, 'new_page', { url: 'about:blank', isolatedContext: s.context });
  const selected = /^(\d+): .*\[selected\]/m.exec(text);
  s.pageId = selected ? Number(selected[1]) : undefined;
  if (s.pageId !== undefined) s.pages.push(s.pageId);
  s.gatePage = forGate;
}

// The element's uid, waiting for it as an action waits (up to the op's limit). The snapshot is
// tried first: every MCP tool call waits for the page's DOM to settle (~200 ms here), so checking
// for the element beforehand cost each action on a present element one more call.
async function uidFor(s, selector, state, limitMs) {
  const present = await snapshotUid(s, selector);
  if (present !== null) return present;
  await poll(state.budget, limitMs, () => evaluate(s, `!!document.querySelector(${JSON.stringify(selector)})`), `selector ${selector}`);
  const uid = await snapshotUid(s, selector);
  if (uid === null) throw new Error(`${selector} has no uid in the MCP snapshot`);
  return uid;
}

// The uid the snapshot gives the selector's first element, or null (no such element yet).
async function snapshotUid(s, selector) {
  const snapshot = await tool(s, 'take_snapshot', { verbose: true });
  // Text boxes, markers and ignored nodes are never an op's target (and the verbose snapshot
  // gives them one shared uid that resolves to no element): only element nodes are candidates.
  const uids = [...new Set([...snapshot.matchAll(/uid=(\S+) (\S+)/g)]
    .filter((m) => !NOT_ELEMENTS.has(m[2])).map((m) => m[1]))];
  if (!uids.length) return null;
  const find = `(...elements) => elements.indexOf(document.querySelector(${JSON.stringify(selector)}))`;
  let index;
  try {
    index = await script(s, find, uids);
  } catch (e) {
    // One batch cannot mix elements of several frames: then one uid at a time, in order.
    if (!/different frames/.test(e.message)) throw e;
    index = -1;
    for (const [i, uid] of uids.entries()) {
      if ((await script(s, find, [uid]).catch(() => -1)) === 0) { index = i; break; }
    }
  }
  return index < 0 ? null : uids[index];
}

const navigate = (type) => async (s, step, state) => {
  await tool(s, 'navigate_page', { type, ...(step.url ? { url: step.url } : {}), timeout: Math.round(state.budget.wait(step.timeout_ms)) });
  return evaluate(s, 'location.href');
};

// Reads act on the page as it is now: an element that is not there fails at once.
const read = (expression) => (s, step) => evaluate(s, elementNow(step.selector, expression));

async function setChecked(s, step, state, wanted) {
  const uid = await uidFor(s, step.selector, state, step.timeout_ms);
  if ((await script(s, '(e) => !!e.checked', [uid])) !== wanted) await tool(s, 'click', { uid });
  return wanted;
}

function dialogAction(policy) {
  if (policy.action !== 'accept') return 'dismiss';
  return policy.text !== undefined ? String(policy.text) : 'accept';
}

// The snapshot's lines as {uid, role, name, depth, line}.
function snapshotLines(text) {
  return text.split('\n').map((line) => {
    const m = /^(\s*)uid=(\S+) (\S+)(?: "((?:[^"\\]|\\.)*)")?/.exec(line);
    return m && { depth: m[1].length, uid: m[2], role: m[3], name: m[4] === undefined ? '' : JSON.parse(`"${m[4]}"`), line };
  }).filter(Boolean);
}

async function frameEvaluate(s, step) {
  const frames = snapshotLines(await tool(s, 'take_snapshot', {})).filter((n) => n.role === 'RootWebArea').slice(1);
  const frame = frames.find((n) => (/url="([^"]*)"/.exec(n.line) || [])[1]?.includes(step.url_contains));
  if (!frame) throw new Error(`no frame whose url contains ${step.url_contains}`);
  // evaluate_script runs a function given element uids in those elements' frame
  return script(s, `(e) => (0, eval)(${JSON.stringify(step.expression)})`, [frame.uid]);
}

async function axNodeIdentity(s, step, state) {
  const node = snapshotLines(await tool(s, 'take_snapshot', {})).find((n) => n.role === step.role && n.name === step.name);
  if (!node) throw new Error(`no AX node with role=${step.role} name=${step.name}`);
  const identity = `role=${node.role}|name=${node.name}|uid=${node.uid}`;
  if (!step.compare_to) return identity;
  return `${state.saved[step.compare_to] === identity ? 'stable' : 'changed'}|${identity}`;
}

async function ariaSnapshot(s, step, state) {
  const uid = await uidFor(s, step.selector || 'body', state, step.timeout_ms);
  const lines = snapshotLines(await tool(s, 'take_snapshot', {}));
  const at = lines.findIndex((n) => n.uid === uid);
  if (at < 0) throw new Error(`${step.selector} is not in the snapshot`);
  const rest = lines.slice(at + 1);
  const end = rest.findIndex((n) => n.depth <= lines[at].depth);
  return [lines[at], ...(end < 0 ? rest : rest.slice(0, end))].map((n) => n.line).join('\n');
}

// The network requests list, one {id, method, url} per request since the page's navigation.
async function networkRequests(s) {
  const text = await tool(s, 'list_network_requests', {});
  return [...text.matchAll(/reqid=(\d+) (\w+) (\S+)/g)].map((m) => ({ id: m[1], method: m[2], url: m[3] }));
}

const ops = {
  ...localOps(),
  new_page: async (s) => {
    if (s.gatePage) { s.gatePage = false; return 'page'; }
    await openPage(s, false);
    return 'page';
  },
  close_page: async (s) => {
    const pageId = s.pages.pop();
    if (pageId === undefined) throw new Error('no page to close');
    await tool(s, 'close_page', { pageId });
    if (s.pages.length) await tool(s, 'select_page', { pageId: s.pages[s.pages.length - 1] });
    return 'closed';
  },
  goto: navigate('url'),
  reload: navigate('reload'),
  go_back: navigate('back'),
  go_forward: navigate('forward'),
  evaluate: (s, step) => evaluate(s, step.expression),
  frame_evaluate: frameEvaluate,
  wait_for_function: async (s, step, state) => { await poll(state.budget, step.timeout_ms, async () => !!(await evaluate(s, step.expression)), step.expression); return true; },
  wait_for_selector: async (s, step, state) => {
    const visible = `(() => { const e = document.querySelector(${JSON.stringify(step.selector)}); if (!e) return false; const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; })()`;
    const gone = step.state === 'hidden' || step.state === 'detached';
    const test = gone ? `!${visible}` : step.state === 'visible' ? visible : `!!document.querySelector(${JSON.stringify(step.selector)})`;
    await poll(state.budget, step.timeout_ms, () => evaluate(s, test), `selector ${step.selector}`);
    return true;
  },
  click: async (s, step, state) => {
    const uid = await uidFor(s, step.selector, state, step.timeout_ms);
    for (let i = 0; i < (step.times || 1); i += 1) {
      // Once the task answers dialogs, a click goes through evaluate_script, whose dialogAction
      // answers a dialog the click opens (the click tool would wait on the blocked page).
      if (s.dialogPolicy) await tool(s, 'evaluate_script', { function: '(e) => { e.click(); }', args: [uid], dialogAction: dialogAction(s.dialogPolicy) });
      else await tool(s, 'click', { uid });
    }
    return step.selector;
  },
  hover: async (s, step, state) => { await tool(s, 'hover', { uid: await uidFor(s, step.selector, state, step.timeout_ms) }); return step.selector; },
  fill: async (s, step, state) => { await tool(s, 'fill', { uid: await uidFor(s, step.selector, state, step.timeout_ms), value: step.value }); return step.value; },
  // the reference's route: a click on the <option>'s own uid (fill on the <select> times out
  // on engines where the option list does not become interactive)
  select_option: async (s, step, state) => {
    const option = `${step.selector} option[value=${JSON.stringify(String(step.value))}]`;
    await tool(s, 'click', { uid: await uidFor(s, option, state, step.timeout_ms) });
    return step.value;
  },
  check: (s, step, state) => setChecked(s, step, state, true),
  uncheck: (s, step, state) => setChecked(s, step, state, false),
  focus: async (s, step, state) => { await script(s, '(e) => { e.focus(); }', [await uidFor(s, step.selector, state, step.timeout_ms)]); return step.selector; },
  press: async (s, step, state) => {
    if (step.selector) await script(s, '(e) => { e.focus(); }', [await uidFor(s, step.selector, state, step.timeout_ms)]);
    await tool(s, 'press_key', { key: step.key });
    return step.key;
  },
  type: async (s, step, state) => {
    await script(s, '(e) => { e.focus(); }', [await uidFor(s, step.selector, state, step.timeout_ms)]);
    await tool(s, 'type_text', { text: step.value ?? step.text });
    return step.value ?? step.text;
  },
  keyboard_type: async (s, step) => { await tool(s, 'type_text', { text: step.text }); return step.text; },
  ...elementReads(read),
  is_visible: (s, step) => evaluate(s, `(() => { const e = document.querySelector(${JSON.stringify(step.selector)}); if (!e) return false;
    const r = e.getBoundingClientRect(); const st = getComputedStyle(e); return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none'; })()`),
  count: (s, step) => evaluate(s, `document.querySelectorAll(${JSON.stringify(step.selector)}).length`),
  url: (s) => evaluate(s, 'location.href'),
  title: (s) => evaluate(s, 'document.title'),
  content: (s) => evaluate(s, 'document.documentElement.outerHTML'),
  user_agent: (s) => evaluate(s, 'navigator.userAgent'),
  record_requests: async (s, step) => { s.recording = { pattern: step.pattern || '**', before: new Set((await networkRequests(s)).map((r) => r.id)) }; return 'recording'; },
  get_recorded_requests: async (s) => {
    if (!s.recording) return '';
    const fresh = (await networkRequests(s)).filter((r) => !s.recording.before.has(r.id) && urlMatches(r.url, s.recording.pattern));
    return fresh.map((r) => `${r.method} ${r.url}`).join('\n');
  },
  get_console: (s) => tool(s, 'list_console_messages', {}),
  on_dialog: (s, step) => { s.dialogPolicy = { action: step.action || 'accept', text: step.text }; return step.action || 'accept'; },
  set_input_files: async (s, step, state) => { await tool(s, 'upload_file', { uid: await uidFor(s, step.selector, state, step.timeout_ms), filePath: step.path }); return step.path; },
  // cookies through the page's script (HttpOnly cookies are not visible there)
  set_cookie: async (s, step) => {
    const origin = await evaluate(s, 'location.origin');
    if (step.url && !step.url.startsWith(origin)) throw new Error(`the page (${origin}) is not on the cookie's origin ${step.url}`);
    await evaluate(s, `document.cookie = ${JSON.stringify(`${step.name}=${step.value ?? ''}; path=/`)}`);
    return step.name;
  },
  get_cookies: async (s) => evaluate(s, `document.cookie ? document.cookie.split('; ').map((c) => { const i = c.indexOf('='); return { name: c.slice(0, i), value: c.slice(i + 1) }; }) : []`),
  ax_snapshot: (s) => tool(s, 'take_snapshot', {}),
  ax_node_identity: axNodeIdentity,
  aria_snapshot: ariaSnapshot,
};

// each attempt's pages in an isolated context of the server's (its new_page isolatedContext)
main({ key: 'chrome_devtools_mcp', name: `chrome-devtools-mcp ${VERSION}`, connect, liveProblem, close, ops, isolations: ['context'] });
