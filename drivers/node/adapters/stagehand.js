#!/usr/bin/env node
'use strict';
// Stagehand path: @browserbasehq/stagehand in LOCAL mode attached to the runner's engine through
// `localBrowserLaunchOptions.cdpUrl` (it launches nothing). Only the deterministic surface is
// used (context.newPage, page.goto/reload/goBack, page.locator(...).click/fill/..., page.evaluate,
// page.sendCDP); no model client is configured, so act/extract/observe are never reachable.

const { Stagehand } = require('@browserbasehq/stagehand');
const { main, poll } = require('./common');
const { commonOps } = require('./page_ops');
const { rawOps, watchPage } = require('./cdp_raw_ops');

async function connect(payload, budget) {
  const stagehand = new Stagehand({
    env: 'LOCAL',
    localBrowserLaunchOptions: { cdpUrl: payload.browser_ws, connectTimeoutMs: budget.wait(payload.connect_timeout_ms || 15000) },
    verbose: 0,
    disablePino: true,
    logger: (line) => process.stderr.write(`stagehand: ${line.message}\n`),
  });
  await stagehand.init();
  const session = { stagehand, opened: [], console: [], dialogs: [], requests: [], recording: false, metrics: {} };
  session.evaluate = (expression) => session.page.evaluate(expression);
  session.browserVersion = () => stagehand.context.conn.send('Browser.getVersion');
  session.cdp = (method, params) => session.page.sendCDP(method, params || {});
  // Dialogs, requests and routes through Stagehand's own CDP session of the page's main frame.
  session.on = (method, handler) => session.page.getSessionForFrame(session.page.mainFrameId()).on(method, handler);
  session.browserCdp = (method, params) => stagehand.context.conn.send(method, params || {});
  session.onBrowser = (method, handler) => stagehand.context.conn.on(method, handler);
  session.click = (s, step, state) => ops.click(s, step, state);
  return session;
}

const liveProduct = async (session) => (await session.browserVersion()).product;

async function close(session) {
  // Only the pages this attempt opened are closed; the engine belongs to the runner, and
  // Stagehand's close() of a cdpUrl connection only drops its websocket.
  for (const page of session.opened) {
    try { await page.close(); } catch (e) { process.stderr.write(`page close: ${e.message}\n`); }
  }
  await session.stagehand.close();
}

// A navigation op's value is the main response's HTTP status (null: no response).
const status = (response) => (response ? response.status() : null);
const ms = (state, step) => state.budget.wait(step.timeout_ms);

// Stagehand's locators act at once (no auto-wait): an op first waits for its element to be
// attached, within the op's own limit, like the other frameworks' actionability wait.
async function located(s, step, state) {
  await s.page.waitForSelector(step.selector, { state: 'attached', timeout: ms(state, step) });
  return s.page.locator(step.selector);
}

async function present(s, step) {
  const target = s.page.locator(step.selector).first();
  if ((await target.count()) === 0) throw new Error(`no element matches ${step.selector}`);
  return target;
}

async function setChecked(s, step, state, wanted) {
  const target = await located(s, step, state);
  if ((await target.isChecked()) !== wanted) await target.click();
  return wanted;
}

const pick = (table, names) => Object.fromEntries(names.map((n) => [n, table[n]]));

const ops = commonOps({
  new_page: async (s) => {
    s.page = await s.stagehand.context.newPage();
    s.opened.push(s.page);
    s.page.on('console', (m) => s.console.push(`${m.type()}:${m.text()}`));
    watchPage(s, { console: false });
    return 'page';
  },
  close_page: async (s) => {
    await s.page.close();
    s.opened = s.opened.filter((p) => p !== s.page);
    s.page = s.opened[s.opened.length - 1];
    return 'closed';
  },
  frame_evaluate: async (s, step) => {
    const seen = [];
    for (const frame of s.page.frames()) {
      if (frame.frameId === s.page.mainFrameId()) continue;
      const href = String(await frame.evaluate('location.href'));
      seen.push(href);
      if (href.includes(step.url_contains)) return frame.evaluate(step.expression);
    }
    throw new Error(`no frame whose url contains ${step.url_contains} (${s.page.frames().length} frames: ${seen.join(' ')})`);
  },
  content: (s) => s.evaluate('document.documentElement.outerHTML'),
  ...pick(rawOps, ['route_fulfill', 'route_abort', 'record_requests', 'get_recorded_requests', 'on_dialog', 'get_dialogs', 'download', 'aria_snapshot']),
  goto: async (s, step, state) => status(await s.page.goto(step.url, { timeoutMs: ms(state, step) })),
  reload: async (s, step, state) => status(await s.page.reload({ timeoutMs: ms(state, step) })),
  go_back: async (s, step, state) => status(await s.page.goBack({ timeoutMs: ms(state, step), waitUntil: 'domcontentloaded' })),
  go_forward: async (s, step, state) => status(await s.page.goForward({ timeoutMs: ms(state, step), waitUntil: 'domcontentloaded' })),
  click: async (s, step, state) => {
    const target = await located(s, step, state);
    for (let i = 0; i < (step.times || 1); i += 1) await target.click();
    return step.selector;
  },
  fill: async (s, step, state) => { await (await located(s, step, state)).fill(step.value); return step.value; },
  type: async (s, step, state) => { await (await located(s, step, state)).type(step.value ?? step.text); return step.value ?? step.text; },
  check: (s, step, state) => setChecked(s, step, state, true),
  uncheck: (s, step, state) => setChecked(s, step, state, false),
  hover: async (s, step, state) => { await (await located(s, step, state)).hover(); return step.selector; },
  set_input_files: async (s, step, state) => { await (await located(s, step, state)).setInputFiles(step.path); return step.path; },
  focus: async (s, step, state) => {
    await located(s, step, state);
    await s.evaluate(`document.querySelector(${JSON.stringify(step.selector)}).focus()`);
    return step.selector;
  },
  press: async (s, step, state) => {
    if (step.selector) {
      await located(s, step, state);
      await s.evaluate(`document.querySelector(${JSON.stringify(step.selector)}).focus()`);
    }
    await s.page.keyPress(step.key);
    return step.key;
  },
  keyboard_type: async (s, step) => { await s.page.type(step.text); return step.text; },
  select_option: async (s, step, state) => (await (await located(s, step, state)).selectOption(step.value)).join(','),
  // reads act on the page as it is now: an element that is not there fails at once
  text_content: async (s, step) => (await present(s, step)).textContent(),
  inner_text: async (s, step) => (await present(s, step)).innerText(),
  input_value: async (s, step) => (await present(s, step)).inputValue(),
  is_checked: async (s, step) => (await present(s, step)).isChecked(),
  is_enabled: async (s, step) => { await present(s, step); return s.evaluate(`!document.querySelector(${JSON.stringify(step.selector)}).disabled`); },
  get_attribute: async (s, step) => { await present(s, step); return s.evaluate(`document.querySelector(${JSON.stringify(step.selector)}).getAttribute(${JSON.stringify(step.name)})`); },
  is_visible: async (s, step) => ((await s.page.locator(step.selector).count()) ? s.page.locator(step.selector).first().isVisible() : false),
  count: (s, step) => s.page.locator(step.selector).count(),
  wait_for_selector: async (s, step, state) => {
    await s.page.waitForSelector(step.selector, { state: step.state || 'visible', timeout: ms(state, step) });
    return true;
  },
  wait_for_function: async (s, step, state) => {
    await poll(state.budget, step.timeout_ms, async () => !!(await s.evaluate(step.expression)), step.expression);
    return true;
  },
  set_extra_headers: async (s, step) => { await s.page.setExtraHTTPHeaders(step.headers); return Object.keys(step.headers).join(','); },
  set_cookie: async (s, step) => { await s.stagehand.context.addCookies([{ name: step.name, value: step.value, url: step.url }]); return step.name; },
  get_cookies: (s, step) => s.stagehand.context.cookies(step.url),
  version: async (s) => (await s.browserVersion()).product,
});

// Stagehand's context.newPage opens its targets in the engine's default context
main({ key: 'stagehand', name: `@browserbasehq/stagehand ${require('@browserbasehq/stagehand/package.json').version}`, connect, liveProduct, close, ops, isolations: ['shared'] });
