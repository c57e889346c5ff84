#!/usr/bin/env node
'use strict';
// chrome-remote-interface path: the thinnest Node client. One browser-level connection
// (`local: true`: the bundled protocol, since an engine may not serve /json/protocol), a fresh
// browser context and target per attempt, flat sessions. Page actions are real CDP input events;
// reads are Runtime.evaluate, as a protocol-direct client does them.

const CDP = require('chrome-remote-interface');
const { main, poll, localOps } = require('./common');
const cdpOps = require('./cdp_ops');
const { rawOps, watchPage } = require('./cdp_raw_ops');

const KEYS = {
  Enter: { code: 'Enter', windowsVirtualKeyCode: 13, text: '\r' },
  Tab: { code: 'Tab', windowsVirtualKeyCode: 9 },
  Escape: { code: 'Escape', windowsVirtualKeyCode: 27 },
  Backspace: { code: 'Backspace', windowsVirtualKeyCode: 8 },
};

async function connect(payload) {
  const client = await CDP({ target: payload.browser_ws, local: true });
  const session = { client, events: [], waiters: [], pages: [], listeners: new Map(), browserListeners: new Map(), metrics: { cdp_call_count: 0, cdp_error_count: 0 } };
  // the next page event, for a poll waiting on one (common.poll's `wake`)
  session.nextEvent = () => new Promise((resolve) => session.waiters.push(resolve));
  client.on('event', (message) => {
    const handlers = message.sessionId ? session.listeners.get(message.method) : session.browserListeners.get(message.method);
    if (message.sessionId && message.sessionId === session.sessionId) {
      session.events.push(message.method);
      for (const resolve of session.waiters.splice(0)) resolve();
    }
    for (const handler of handlers || []) if (!message.sessionId || message.sessionId === session.sessionId) handler(message.params);
  });
  const counted = async (sent) => {
    session.metrics.cdp_call_count += 1;
    try { return await sent; } catch (e) { session.metrics.cdp_error_count += 1; throw e; }
  };
  session.cdp = (method, params) => counted(client.send(method, params || {}, session.sessionId));
  session.browserCdp = (method, params) => counted(client.send(method, params || {}));
  session.sendTo = (sessionId, method, params) => counted(client.send(method, params || {}, sessionId));
  const add = (map) => (method, handler) => map.set(method, [...(map.get(method) || []), handler]);
  session.on = add(session.listeners);
  session.onBrowser = add(session.browserListeners);
  session.evaluate = (expression) => evaluate(session, expression);
  session.click = (s, step, state) => click(s, step, state);
  watchPage(session);
  return session;
}

async function liveProduct(session) {
  return (await session.client.send('Browser.getVersion')).product;
}

async function close(session) {
  if (session.contextId) await session.client.send('Target.disposeBrowserContext', { browserContextId: session.contextId });
  else await closeOwnTargets(session); // the shared default context: only this attempt's pages
  await session.client.close();
}

async function closeOwnTargets(session) {
  for (const { targetId } of session.pages.splice(0)) {
    try { await session.client.send('Target.closeTarget', { targetId }); } catch (e) { process.stderr.write(`close page: ${e.message}\n`); }
  }
}

async function evaluate(s, expression) {
  const reply = await s.cdp('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
  if (reply.exceptionDetails) {
    const ex = reply.exceptionDetails;
    throw new Error((ex.exception && ex.exception.description) || ex.text || 'evaluation threw');
  }
  return reply.result.value;
}

const LOADED = ['Page.loadEventFired'];
// A history move may be same-document or a back-forward-cache restore: neither fires load.
const MOVED = ['Page.loadEventFired', 'Page.navigatedWithinDocument', 'Page.frameNavigated'];

// Waits for one of `events` after `action` (a same-document goto, loaderId null, fires none),
// then for the document to have finished parsing.
async function navigation(s, state, action, events = LOADED) {
  const seen = s.events.length;
  const loaderId = await action();
  if (loaderId === null) return;
  await poll(state.budget, null, async () => s.events.slice(seen).some((e) => events.includes(e)), events.join('|'), s.nextEvent);
  await poll(state.budget, null, async () => (await evaluate(s, 'document.readyState')) !== 'loading', 'document parsed');
}

async function historyMove(s, step, state, delta) {
  const history = await s.cdp('Page.getNavigationHistory', {});
  const entry = history.entries[history.currentIndex + delta];
  if (!entry) {
    if (step.optional) return 'no-history-entry';
    throw new Error('no history entry to move to');
  }
  await navigation(s, state, async () => {
    await s.cdp('Page.navigateToHistoryEntry', { entryId: entry.id });
    return 'moved';
  }, MOVED);
  return evaluate(s, 'location.href');
}

const q = (selector) => `document.querySelector(${JSON.stringify(selector)})`;

async function waitElement(s, step, state) {
  await poll(state.budget, step.timeout_ms, () => evaluate(s, `!!${q(step.selector)}`), `selector ${step.selector}`);
}

async function elementCenter(s, step, state) {
  await waitElement(s, step, state);
  return evaluate(s, `(() => { const e = ${q(step.selector)}; e.scrollIntoView({block: 'center', inline: 'center'});
    const r = e.getBoundingClientRect(); return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()`);
}

async function click(s, step, state) {
  const { x, y } = await elementCenter(s, step, state);
  for (let i = 0; i < (step.times || 1); i += 1) {
    await s.cdp('Input.dispatchMouseEvent', { type: 'mouseMoved', x, y });
    await s.cdp('Input.dispatchMouseEvent', { type: 'mousePressed', x, y, button: 'left', clickCount: 1 });
    await s.cdp('Input.dispatchMouseEvent', { type: 'mouseReleased', x, y, button: 'left', clickCount: 1 });
  }
  return step.selector;
}

async function pressKey(s, key) {
  const known = KEYS[key] || { code: key.length === 1 ? `Key${key.toUpperCase()}` : key, text: key.length === 1 ? key : undefined };
  await s.cdp('Input.dispatchKeyEvent', { type: known.text ? 'keyDown' : 'rawKeyDown', key, ...known });
  await s.cdp('Input.dispatchKeyEvent', { type: 'keyUp', key, code: known.code, windowsVirtualKeyCode: known.windowsVirtualKeyCode });
}

async function typeText(s, text) {
  for (const ch of text) {
    await s.cdp('Input.dispatchKeyEvent', { type: 'keyDown', key: ch, text: ch });
    await s.cdp('Input.dispatchKeyEvent', { type: 'keyUp', key: ch });
  }
}

async function hover(s, step, state) {
  const { x, y } = await elementCenter(s, step, state);
  await s.cdp('Input.dispatchMouseEvent', { type: 'mouseMoved', x, y });
  return step.selector;
}

async function setChecked(s, step, state, wanted) {
  await waitElement(s, step, state);
  if ((await evaluate(s, `!!${q(step.selector)}.checked`)) !== wanted) await click(s, step, state);
  return wanted;
}

async function focus(s, step, state) {
  await waitElement(s, step, state);
  await evaluate(s, `${q(step.selector)}.focus()`);
}

const ops = {
  ...cdpOps,
  ...rawOps,
  ...localOps(),
  new_page: async (s) => {
    // One context per attempt (unless shared): a second page shares the first one's storage,
    // like a second tab.
    if (s.isolation !== 'shared') s.contextId = s.contextId || (await s.client.send('Target.createBrowserContext', {})).browserContextId;
    const { targetId } = await s.client.send('Target.createTarget', { url: 'about:blank', ...(s.contextId ? { browserContextId: s.contextId } : {}) });
    s.sessionId = (await s.client.send('Target.attachToTarget', { targetId, flatten: true })).sessionId;
    s.pages.push({ targetId, sessionId: s.sessionId });
    await s.cdp('Page.enable', {});
    await s.cdp('Runtime.enable', {});
    if (s.fetching) await s.cdp('Fetch.enable', { patterns: [{ urlPattern: '*' }] });
    return targetId;
  },
  close_page: async (s) => {
    const page = s.pages.pop();
    if (!page) throw new Error('no page to close');
    await s.client.send('Target.closeTarget', { targetId: page.targetId });
    s.sessionId = s.pages.length ? s.pages[s.pages.length - 1].sessionId : undefined;
    return 'closed';
  },
  goto: async (s, step, state) => {
    await navigation(s, state, async () => {
      const reply = await s.cdp('Page.navigate', { url: step.url });
      if (reply.errorText) throw new Error(reply.errorText);
      return reply.loaderId || null;
    });
    return evaluate(s, 'location.href');
  },
  reload: async (s, step, state) => { await navigation(s, state, async () => { await s.cdp('Page.reload', {}); return 'loader'; }); return evaluate(s, 'location.href'); },
  go_back: (s, step, state) => historyMove(s, step, state, -1),
  go_forward: (s, step, state) => historyMove(s, step, state, +1),
  evaluate: (s, step) => evaluate(s, step.expression),
  wait_for_function: async (s, step, state) => { await poll(state.budget, step.timeout_ms, async () => !!(await evaluate(s, step.expression)), step.expression); return true; },
  wait_for_selector: async (s, step, state) => {
    const visible = `(() => { const e = ${q(step.selector)}; if (!e) return false; const r = e.getBoundingClientRect(); const st = getComputedStyle(e);
      return r.width > 0 && r.height > 0 && st.visibility !== 'hidden'; })()`;
    const gone = step.state === 'hidden' || step.state === 'detached';
    const test = gone ? `!(${visible})` : step.state === 'visible' ? visible : `!!${q(step.selector)}`; // present unless a state is named
    await poll(state.budget, step.timeout_ms, () => evaluate(s, test), `selector ${step.selector}`);
    return true;
  },
  click,
  hover,
  check: (s, step, state) => setChecked(s, step, state, true),
  uncheck: (s, step, state) => setChecked(s, step, state, false),
  focus: async (s, step, state) => { await focus(s, step, state); return step.selector; },
  fill: async (s, step, state) => {
    await focus(s, step, state);
    await evaluate(s, `(() => { const e = ${q(step.selector)}; if (e.select) e.select(); })()`);
    if (step.value === '') await pressKey(s, 'Backspace'); else await s.cdp('Input.insertText', { text: step.value });
    return step.value;
  },
  type: async (s, step, state) => { await focus(s, step, state); await typeText(s, step.value ?? step.text); return step.value ?? step.text; },
  keyboard_type: async (s, step) => { await typeText(s, step.text); return step.text; },
  press: async (s, step, state) => { if (step.selector) await focus(s, step, state); await pressKey(s, step.key); return step.key; },
  select_option: async (s, step, state) => {
    await waitElement(s, step, state);
    return evaluate(s, `(() => { const e = ${q(step.selector)}; e.value = ${JSON.stringify(step.value)};
      e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return e.value; })()`);
  },
  url: (s) => evaluate(s, 'location.href'),
  title: (s) => evaluate(s, 'document.title'),
  user_agent: async (s) => (s.sessionId ? evaluate(s, 'navigator.userAgent') : (await s.client.send('Browser.getVersion')).userAgent),
};

main({ key: 'chrome_remote_interface', name: `chrome-remote-interface ${require('chrome-remote-interface/package.json').version}`, connect, liveProduct, close, ops });
