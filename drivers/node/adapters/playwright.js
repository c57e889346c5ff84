#!/usr/bin/env node
'use strict';
// Playwright path: playwright-core connectOverCDP to the engine the runner started; every op
// goes through Playwright's own page/locator API (raw CDP only for the AX/CSS observation ops).

const { chromium } = require('playwright-core');
const { main } = require('./common');
const { commonOps, navigationOps, closeAttemptPages, digestFile, framesMatching } = require('./page_ops');

async function connect(payload, budget) {
  const browser = await chromium.connectOverCDP(payload.browser_ws, { timeout: budget.wait(payload.connect_timeout_ms || 15000) });
  const session = { browser, console: [], dialogs: [], requests: [], recording: false, metrics: {} };
  session.evaluate = (expression) => session.page.evaluate(expression);
  session.browserVersion = () => browserVersion(session);
  session.defaultContext = () => browser.contexts()[0];
  session.cdp = async (method, params) => {
    session.pageCdp = session.pageCdp || await session.context.newCDPSession(session.page);
    return session.pageCdp.send(method, params);
  };
  return session;
}

async function browserVersion(session) {
  const cdp = await session.browser.newBrowserCDPSession();
  try { return await cdp.send('Browser.getVersion'); } finally { await cdp.detach(); }
}

const liveProduct = async (session) => (await browserVersion(session)).product;

async function close(session) {
  if (session.context) await closeAttemptPages(session);
  // connectOverCDP's close() only disconnects: the engine belongs to the runner.
  await session.browser.close();
}

// A history move waits for its commit only (see navigationOps).
const HISTORY_WAIT = 'commit';
const t = (state, step) => ({ timeout: state.budget.wait(step.timeout_ms) });

// A read acts on the page as it is now: an element that is not there fails at once (Playwright's
// locator reads would wait for it up to the action timeout).
async function now(s, selector) {
  const locator = s.page.locator(selector).first();
  if ((await locator.count()) === 0) throw new Error(`no element matches ${selector}`);
  return locator;
}
const NOW = { timeout: 1000 }; // the element is there: the read itself gets a short limit

const ops = commonOps({
  ...navigationOps((s) => s.browser.newContext(), HISTORY_WAIT),
  click: async (s, step, state) => {
    for (let i = 0; i < (step.times || 1); i += 1) await s.page.click(step.selector, t(state, step));
    return step.selector;
  },
  fill: async (s, step, state) => { await s.page.fill(step.selector, step.value, t(state, step)); return step.value; },
  type: async (s, step, state) => { await s.page.locator(step.selector).pressSequentially(step.value ?? step.text, t(state, step)); return step.value ?? step.text; },
  check: async (s, step, state) => { await s.page.check(step.selector, t(state, step)); return true; },
  uncheck: async (s, step, state) => { await s.page.uncheck(step.selector, t(state, step)); return false; },
  hover: async (s, step, state) => { await s.page.hover(step.selector, t(state, step)); return step.selector; },
  focus: async (s, step, state) => { await s.page.focus(step.selector, t(state, step)); return step.selector; },
  press: async (s, step, state) => {
    if (step.selector) await s.page.press(step.selector, step.key, t(state, step));
    else await s.page.keyboard.press(step.key);
    return step.key;
  },
  keyboard_type: async (s, step) => { await s.page.keyboard.type(step.text); return step.text; },
  select_option: async (s, step, state) => (await s.page.selectOption(step.selector, step.value, t(state, step))).join(','),
  text_content: async (s, step) => (await now(s, step.selector)).textContent(NOW),
  inner_text: async (s, step) => (await now(s, step.selector)).innerText(NOW),
  input_value: async (s, step) => (await now(s, step.selector)).inputValue(NOW),
  is_checked: async (s, step) => (await now(s, step.selector)).isChecked(NOW),
  is_enabled: async (s, step) => (await now(s, step.selector)).isEnabled(NOW),
  get_attribute: async (s, step) => (await now(s, step.selector)).getAttribute(step.name, NOW),
  is_visible: (s, step) => s.page.locator(step.selector).first().isVisible(),
  count: (s, step) => s.page.locator(step.selector).count(),
  contexts_count: (s) => s.browser.contexts().length,
  wait_for_selector: async (s, step, state) => {
    await s.page.waitForSelector(step.selector, { state: step.state || 'visible', ...t(state, step) });
    return true;
  },
  frame_evaluate: (s, step) => framesMatching(s.page.frames(), step.url_contains).evaluate(step.expression),
  route_fulfill: async (s, step) => {
    await s.page.route(step.pattern, (route) => route.fulfill({ status: step.status || 200, contentType: step.content_type, body: step.body }));
    return step.pattern;
  },
  route_abort: async (s, step) => { await s.page.route(step.pattern, (route) => route.abort()); return step.pattern; },
  set_extra_headers: async (s, step) => { await s.page.setExtraHTTPHeaders(step.headers); return Object.keys(step.headers).join(','); },
  set_cookie: async (s, step) => { await s.context.addCookies([{ name: step.name, value: step.value, url: step.url }]); return step.name; },
  get_cookies: (s, step) => s.context.cookies(step.url),
  set_input_files: async (s, step, state) => { await s.page.setInputFiles(step.selector, step.path, t(state, step)); return step.path; },
  download: async (s, step, state) => {
    const [download] = await Promise.all([s.page.waitForEvent('download', t(state, step)), s.page.click(step.selector, t(state, step))]);
    await download.saveAs(step.path);
    return digestFile(step.path);
  },
  aria_snapshot: (s, step, state) => s.page.locator(step.selector).ariaSnapshot(t(state, step)),
  version: (s) => s.browser.version(),
});

main({ key: 'playwright', name: `playwright-core ${require('playwright-core/package.json').version}`, connect, liveProduct, close, ops });
