'use strict';
// The vocabulary's page-state, network, dialog, file, cookie and frame ops for a protocol-direct
// Node client: each op is the CDP command(s) that express it. The session supplies
// cdp(method, params) on the current page's session, browserCdp(method, params) on the browser
// connection, on(method, handler) for the page sessions' events, onBrowser(method, handler) for
// browser-level events, sendTo(sessionId, method, params), and evaluate(expression) in the page.

const fs = require('fs');
const path = require('path');
const { poll, urlMatches, digestFile, elementNow, elementReads } = require('./common');

const q = (selector) => `document.querySelector(${JSON.stringify(selector)})`;

function remoteText(arg) {
  if (arg.value !== undefined) return typeof arg.value === 'string' ? arg.value : JSON.stringify(arg.value);
  return arg.description || arg.type;
}

// Wires the recorders a fresh page needs (console, dialogs, requests, routes, frame contexts);
// called once per session before the first page: events carry their session id.
function watchPage(s, { console: withConsole = true } = {}) {
  s.console = s.console || [];
  s.dialogs = s.dialogs || [];
  s.requests = s.requests || [];
  s.routes = s.routes || [];
  s.frameContexts = s.frameContexts || new Map();
  if (withConsole) s.on('Runtime.consoleAPICalled', (e) => s.console.push(`${e.type}:${(e.args || []).map(remoteText).join(' ')}`));
  s.on('Runtime.executionContextCreated', (e) => {
    const aux = e.context.auxData || {};
    if (aux.isDefault && aux.frameId) s.frameContexts.set(aux.frameId, e.context.id);
  });
  s.on('Page.javascriptDialogOpening', (e) => {
    s.dialogs.push(`${e.type}:${e.message}`);
    const policy = s.dialogPolicy || { action: 'dismiss' };
    const answer = { accept: policy.action === 'accept', ...(policy.text !== undefined ? { promptText: policy.text } : {}) };
    s.cdp('Page.handleJavaScriptDialog', answer).catch((err) => s.dialogs.push(`answer-failed:${err.message}`));
  });
  s.on('Network.requestWillBeSent', (e) => {
    if (s.recording && urlMatches(e.request.url, s.recording)) s.requests.push(`${e.request.method} ${e.request.url}`);
  });
  s.on('Fetch.requestPaused', (e) => answerPaused(s, e).catch((err) => process.stderr.write(`route: ${err.message}\n`)));
}

async function answerPaused(s, e) {
  const route = s.routes.find((r) => urlMatches(e.request.url, r.pattern));
  if (!route) return s.cdp('Fetch.continueRequest', { requestId: e.requestId });
  if (route.abort) return s.cdp('Fetch.failRequest', { requestId: e.requestId, errorReason: 'Failed' });
  return s.cdp('Fetch.fulfillRequest', {
    requestId: e.requestId,
    responseCode: route.status,
    responseHeaders: [{ name: 'Content-Type', value: route.contentType }],
    body: Buffer.from(route.body, 'utf8').toString('base64'),
  });
}

async function addRoute(s, step, route) {
  s.routes.push({ pattern: step.pattern, ...route });
  if (!s.fetching) {
    await s.cdp('Fetch.enable', { patterns: [{ urlPattern: '*' }] });
    s.fetching = true;
  }
  return step.pattern;
}

async function nodeOf(s, selector) {
  const doc = await s.cdp('DOM.getDocument', { depth: 0 });
  const found = await s.cdp('DOM.querySelector', { nodeId: doc.root.nodeId, selector });
  if (!found.nodeId) throw new Error(`no element matches ${selector}`);
  return found.nodeId;
}

function axValue(field) {
  return field && field.value !== undefined ? String(field.value) : '';
}

// The AX subtree under the element, one "- role "name"" line per node, ignored nodes flattened.
async function ariaSnapshot(s, step) {
  const nodeId = await nodeOf(s, step.selector || 'body');
  const { node } = await s.cdp('DOM.describeNode', { nodeId });
  const tree = await s.cdp('Accessibility.getFullAXTree', {});
  const byId = new Map(tree.nodes.map((n) => [n.nodeId, n]));
  const root = tree.nodes.find((n) => n.backendDOMNodeId === node.backendNodeId);
  if (!root) throw new Error(`no AX node for ${step.selector || 'body'}`);
  const lines = [];
  const walk = (n, depth) => {
    const shown = !n.ignored && axValue(n.role) && !['none', 'generic', 'InlineTextBox'].includes(axValue(n.role));
    if (shown) lines.push(`${'  '.repeat(depth)}- ${axValue(n.role)}${axValue(n.name) ? ` ${JSON.stringify(axValue(n.name))}` : ''}`);
    for (const child of n.childIds || []) if (byId.has(child)) walk(byId.get(child), shown ? depth + 1 : depth);
  };
  walk(root, 0);
  return lines.join('\n');
}

// The frame whose URL contains url_contains: its main-world context in the page's session, or
// (an out-of-process frame) its own target attached to the browser connection.
async function frameEvaluate(s, step) {
  const { frameTree } = await s.cdp('Page.getFrameTree', {});
  const frames = [];
  const walk = (t) => { frames.push(t.frame); (t.childFrames || []).forEach(walk); };
  walk(frameTree);
  const frame = frames.find((f) => f.parentId && (f.url || '').includes(step.url_contains));
  const params = { expression: step.expression, returnByValue: true, awaitPromise: true };
  let reply;
  if (frame && s.frameContexts.has(frame.id)) {
    reply = await s.cdp('Runtime.evaluate', { ...params, contextId: s.frameContexts.get(frame.id) });
  } else {
    const { targetInfos } = await s.browserCdp('Target.getTargets', {});
    const target = targetInfos.find((t) => t.type === 'iframe' && t.url.includes(step.url_contains));
    if (!target) throw new Error(`no frame whose url contains ${step.url_contains}`);
    const { sessionId } = await s.browserCdp('Target.attachToTarget', { targetId: target.targetId, flatten: true });
    try { reply = await s.sendTo(sessionId, 'Runtime.evaluate', params); } finally { s.browserCdp('Target.detachFromTarget', { sessionId }).catch(() => {}); }
  }
  if (reply.exceptionDetails) throw new Error((reply.exceptionDetails.exception || {}).description || reply.exceptionDetails.text);
  return reply.result.value;
}

async function download(s, step, state) {
  const dir = path.dirname(step.path);
  fs.mkdirSync(dir, { recursive: true });
  const done = new Map();
  s.onBrowser('Browser.downloadProgress', (e) => { if (e.state !== 'inProgress') done.set(e.guid, e.state); });
  await s.browserCdp('Browser.setDownloadBehavior', { behavior: 'allowAndName', downloadPath: dir, eventsEnabled: true, ...(s.contextId ? { browserContextId: s.contextId } : {}) });
  await s.click(s, step, state);
  const [guid, result] = await poll(state.budget, step.timeout_ms, async () => done.entries().next().value, 'download');
  if (result !== 'completed') throw new Error(`download ${result}`);
  fs.renameSync(path.join(dir, guid), step.path);
  return digestFile(step.path);
}

const read = (expression) => (s, step) => s.evaluate(elementNow(step.selector, expression));

const VISIBLE = `(() => { const r = e.getBoundingClientRect(); const st = getComputedStyle(e);
  return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none'; })()`;

const rawOps = {
  content: (s) => s.evaluate('document.documentElement.outerHTML'),
  ...elementReads(read),
  is_visible: (s, step) => s.evaluate(`(() => { const e = ${q(step.selector)}; if (!e) return false; return ${VISIBLE}; })()`),
  count: (s, step) => s.evaluate(`document.querySelectorAll(${JSON.stringify(step.selector)}).length`),
  version: async (s) => (await s.browserCdp('Browser.getVersion', {})).product,
  contexts_count: async (s) => (await s.browserCdp('Target.getBrowserContexts', {})).browserContextIds.length + 1,
  frame_evaluate: frameEvaluate,
  route_fulfill: (s, step) => addRoute(s, step, { status: step.status || 200, contentType: step.content_type || 'application/json', body: step.body == null ? '' : String(step.body) }),
  route_abort: (s, step) => addRoute(s, step, { abort: true }),
  set_extra_headers: async (s, step) => {
    await s.cdp('Network.enable', {});
    await s.cdp('Network.setExtraHTTPHeaders', { headers: step.headers });
    return Object.keys(step.headers).join(',');
  },
  record_requests: async (s, step) => { s.recording = step.pattern || '**'; await s.cdp('Network.enable', {}); return 'recording'; },
  get_recorded_requests: (s) => s.requests.join('\n'),
  get_console: (s) => s.console.join('\n'),
  on_dialog: (s, step) => { s.dialogPolicy = { action: step.action || 'accept', text: step.text }; return step.action || 'accept'; },
  get_dialogs: (s) => s.dialogs.join('\n'),
  set_input_files: async (s, step) => {
    await s.cdp('DOM.setFileInputFiles', { files: [step.path], nodeId: await nodeOf(s, step.selector) });
    return step.path;
  },
  download,
  set_cookie: async (s, step) => {
    const reply = await s.cdp('Network.setCookie', { name: step.name, value: step.value == null ? '' : String(step.value), url: step.url });
    if (reply && reply.success === false) throw new Error(`cookie ${step.name} refused`);
    return step.name;
  },
  get_cookies: async (s, step) => (await s.cdp('Network.getCookies', step.url ? { urls: [step.url] } : {})).cookies,
  aria_snapshot: ariaSnapshot,
};

module.exports = { rawOps, watchPage, nodeOf, q };
