#!/usr/bin/env node
'use strict';
// chrome-devtools-mcp path: the adapter is an MCP client. It starts the MCP server
// (`--wsEndpoint`: connect-only, it never launches a browser) as its child and speaks MCP
// JSON-RPC over the server's stdio; every op is one or more of the server's own tools.
// Selectors become element uids through a verbose `take_snapshot` plus one `evaluate_script`
// that compares every snapshot uid's element with the selector's.

const { spawn } = require('child_process');
const { main, poll } = require('./common');

const SERVER = require.resolve('chrome-devtools-mcp/build/src/bin/chrome-devtools-mcp.js');
const VERSION = require('chrome-devtools-mcp/package.json').version;
const NOT_ELEMENTS = new Set(['InlineTextBox', 'StaticText', 'ListMarker', 'ignored']);

function startServer(payload) {
  const child = spawn(process.execPath, [SERVER, '--wsEndpoint', payload.browser_ws, '--usageStatistics=false', '--performanceCrux=false'], {
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
  session.metrics.tool_call_count += 1;
  const result = await request(session.rpc, 'tools/call', { name, arguments: args || {} });
  const text = (result.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  if (result.isError) { session.metrics.tool_error_count += 1; throw new Error(text.split('\n')[0]); }
  return text;
}

// evaluate_script answers with the JSON of the function's result inside a ```json block.
async function script(session, fn, args) {
  const text = await tool(session, 'evaluate_script', { function: fn, ...(args ? { args } : {}) });
  const match = /```json\n([\s\S]*?)\n```/.exec(text);
  if (!match) throw new Error(`unexpected evaluate_script answer: ${text.slice(0, 200)}`);
  return match[1] === 'undefined' ? undefined : JSON.parse(match[1]);
}

const evaluate = (s, expression) => script(s, `async () => (0, eval)(${JSON.stringify(expression)})`);

async function connect(payload) {
  const rpc = startServer(payload);
  await request(rpc, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'metewand', version: '1' } });
  rpc.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
  return { rpc, metrics: { tool_call_count: 0, tool_error_count: 0 } };
}

// The server exposes no raw CDP: the live identity is the page's user agent (the peer does the same).
// An engine that starts with no page (Lightpanda) gets the attempt's first page here; the first
// new_page op then takes it instead of opening another.
async function liveProblem(session, payload, version) {
  if (!/\[selected\]/.test(await tool(session, 'list_pages', {}))) await openPage(session, true);
  const ua = await evaluate(session, 'navigator.userAgent');
  if (version['User-Agent'] && ua !== version['User-Agent']) return `live navigator.userAgent ${JSON.stringify(ua)} != /json/version User-Agent`;
  return null;
}

async function close(session) {
  if (session.pageOpened) { try { await tool(session, 'close_page', { pageId: session.pageId }); } catch (e) { /* last page */ } }
  session.rpc.child.stdin.end();
  session.rpc.child.kill('SIGTERM');
}

async function openPage(s, forGate) {
  const text = await tool(s, 'new_page', { url: 'about:blank', isolatedContext: 'metewand-attempt' });
  const selected = /^(\d+): .*\[selected\]/m.exec(text);
  s.pageId = selected ? Number(selected[1]) : undefined;
  s.pageOpened = s.pageId !== undefined;
  s.gatePage = forGate;
}

async function uidFor(s, selector, state, limitMs) {
  await poll(state.budget, limitMs, () => evaluate(s, `!!document.querySelector(${JSON.stringify(selector)})`), `selector ${selector}`);
  const snapshot = await tool(s, 'take_snapshot', { verbose: true });
  // Text boxes, markers and ignored nodes are never an op's target (and the verbose snapshot
  // gives them one shared uid that resolves to no element): only element nodes are candidates.
  const uids = [...new Set([...snapshot.matchAll(/uid=(\S+) (\S+)/g)]
    .filter((m) => !NOT_ELEMENTS.has(m[2])).map((m) => m[1]))];
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
  if (index < 0) throw new Error(`${selector} has no uid in the MCP snapshot`);
  return uids[index];
}

const navigate = (type) => async (s, step, state) => {
  await tool(s, 'navigate_page', { type, ...(step.url ? { url: step.url } : {}), timeout: Math.round(state.budget.wait(step.timeout_ms)) });
  return evaluate(s, 'location.href');
};

const read = (expression) => async (s, step, state) => {
  await poll(state.budget, step.timeout_ms, () => evaluate(s, `!!document.querySelector(${JSON.stringify(step.selector)})`), `selector ${step.selector}`);
  return evaluate(s, `document.querySelector(${JSON.stringify(step.selector)})${expression}`);
};

const ops = {
  new_page: async (s) => {
    if (s.gatePage) { s.gatePage = false; return 'page'; }
    await openPage(s, false);
    return 'page';
  },
  goto: navigate('url'),
  reload: navigate('reload'),
  go_back: navigate('back'),
  go_forward: navigate('forward'),
  evaluate: (s, step) => evaluate(s, step.expression),
  wait_for_function: async (s, step, state) => { await poll(state.budget, step.timeout_ms, async () => !!(await evaluate(s, step.expression)), step.expression); return true; },
  wait_for_selector: async (s, step, state) => {
    const test = step.state === 'visible'
      ? `(() => { const e = document.querySelector(${JSON.stringify(step.selector)}); if (!e) return false; const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; })()`
      : `!!document.querySelector(${JSON.stringify(step.selector)})`;
    await poll(state.budget, step.timeout_ms, () => evaluate(s, test), `selector ${step.selector}`);
    return true;
  },
  click: async (s, step, state) => {
    const uid = await uidFor(s, step.selector, state, step.timeout_ms);
    for (let i = 0; i < (step.times || 1); i += 1) await tool(s, 'click', { uid });
    return step.selector;
  },
  fill: async (s, step, state) => { await tool(s, 'fill', { uid: await uidFor(s, step.selector, state, step.timeout_ms), value: step.value }); return step.value; },
  select_option: async (s, step, state) => { await tool(s, 'fill', { uid: await uidFor(s, step.selector, state, step.timeout_ms), value: step.value }); return step.value; },
  check: async (s, step, state) => { await tool(s, 'fill', { uid: await uidFor(s, step.selector, state, step.timeout_ms), value: 'true' }); return true; },
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
  text_content: read('.textContent'),
  input_value: read('.value'),
  is_checked: read('.checked'),
  get_attribute: (s, step, state) => read(`.getAttribute(${JSON.stringify(step.name)})`)(s, step, state),
  count: (s, step) => evaluate(s, `document.querySelectorAll(${JSON.stringify(step.selector)}).length`),
  url: (s) => evaluate(s, 'location.href'),
  title: (s) => evaluate(s, 'document.title'),
  user_agent: (s) => evaluate(s, 'navigator.userAgent'),
  ax_snapshot: (s) => tool(s, 'take_snapshot', {}),
};

main({ key: 'chrome_devtools_mcp', name: `chrome-devtools-mcp ${VERSION}`, connect, liveProblem, close, ops });
