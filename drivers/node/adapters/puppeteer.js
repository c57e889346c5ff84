#!/usr/bin/env node
'use strict';
// Puppeteer path: puppeteer-core connect({browserWSEndpoint}) to the engine the runner started;
// ops go through Puppeteer's page/element API. It never launches a browser.

const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');
const { main, poll, globToRegExp, digestFile } = require('./common');
const { commonOps, navigationOps, closeAttemptPages, framesMatching, pageExpression } = require('./page_ops');

// As the peer's Puppeteer path connects: no default viewport (a page keeps the window's size,
// with no Emulation.setDeviceMetricsOverride on every new page) unless the task's
// connect_options give one; they are laid over these defaults.
async function connect(payload, budget) {
  const options = payload.connect_options && typeof payload.connect_options === 'object' ? payload.connect_options : {};
  const browser = await puppeteer.connect({
    defaultViewport: null,
    protocolTimeout: budget.wait(payload.task_timeout_ms),
    ...options,
    browserWSEndpoint: payload.browser_ws,
  });
  const session = { browser, console: [], dialogs: [], requests: [], routes: [], recording: false, metrics: {} };
  session.evaluate = (expression) => session.page.evaluate(expression);
  session.browserVersion = () => browserVersion(session);
  session.defaultContext = () => browser.defaultBrowserContext();
  session.cdp = async (method, params) => {
    session.pageCdp = session.pageCdp || await session.page.createCDPSession();
    return session.pageCdp.send(method, params);
  };
  return session;
}

// Browser.getVersion over Puppeteer's own root connection (browser.version / userAgent): an
// engine need not list a browser target for this.
async function browserVersion(session) {
  return { product: await session.browser.version(), userAgent: await session.browser.userAgent() };
}

// The live gate needs the product only: one Browser.getVersion, as the peer's gate sends (the
// user agent is a second one, asked for only by the user_agent op).
const liveProduct = (session) => session.browser.version();

async function close(session) {
  if (session.context) await closeAttemptPages(session);
  await session.browser.disconnect(); // the engine belongs to the runner
}

async function addRoute(s, step, handle) {
  s.routes.push({ re: globToRegExp(step.pattern), handle });
  if (!s.intercepting) {
    s.intercepting = true;
    await s.page.setRequestInterception(true);
    s.page.on('request', (request) => {
      const route = s.routes.find((r) => r.re.test(request.url()));
      if (route) route.handle(request); else request.continue();
    });
  }
  return step.pattern;
}

async function download(s, step, state) {
  const dir = path.dirname(step.path);
  fs.mkdirSync(dir, { recursive: true });
  const cdp = await s.browser.target().createCDPSession();
  const done = new Map();
  cdp.on('Browser.downloadProgress', (e) => { if (e.state !== 'inProgress') done.set(e.guid, e.state); });
  await cdp.send('Browser.setDownloadBehavior', { behavior: 'allowAndName', downloadPath: dir, eventsEnabled: true, ...(s.context.id ? { browserContextId: s.context.id } : {}) });
  try {
    await s.page.click(step.selector);
    const [guid, result] = await poll(state.budget, step.timeout_ms, async () => done.entries().next().value, 'download');
    if (result !== 'completed') throw new Error(`download ${result}`);
    fs.renameSync(path.join(dir, guid), step.path);
    return digestFile(step.path);
  } finally {
    await cdp.detach();
  }
}

// Puppeteer has no commit wait: a history move waits for DOMContentLoaded.
const HISTORY_WAIT = 'domcontentloaded';
const t = (state, step) => ({ timeout: state.budget.wait(step.timeout_ms) });

async function setChecked(s, step, state, wanted) {
  const handle = await element(s, step, state);
  if ((await handle.evaluate((e) => e.checked)) !== wanted) await handle.click();
  return wanted;
}

async function element(s, step, state) {
  const handle = await s.page.waitForSelector(step.selector, t(state, step));
  if (!handle) throw new Error(`no element ${step.selector}`);
  return handle;
}

const ops = commonOps({
  ...navigationOps((s) => s.browser.createBrowserContext(), HISTORY_WAIT),
  click: async (s, step, state) => {
    const handle = await element(s, step, state);
    for (let i = 0; i < (step.times || 1); i += 1) await handle.click();
    return step.selector;
  },
  fill: async (s, step, state) => {
    const handle = await element(s, step, state);
    await handle.evaluate((e) => { e.value = ''; });
    await handle.type(step.value);
    return step.value;
  },
  type: async (s, step, state) => { await (await element(s, step, state)).type(step.value ?? step.text); return step.value ?? step.text; },
  check: (s, step, state) => setChecked(s, step, state, true),
  uncheck: (s, step, state) => setChecked(s, step, state, false),
  hover: async (s, step, state) => { await (await element(s, step, state)).hover(); return step.selector; },
  focus: async (s, step, state) => { await (await element(s, step, state)).focus(); return step.selector; },
  press: async (s, step, state) => {
    if (step.selector) await (await element(s, step, state)).press(step.key);
    else await s.page.keyboard.press(step.key);
    return step.key;
  },
  keyboard_type: async (s, step) => { await s.page.keyboard.type(step.text); return step.text; },
  // Puppeteer's own wait, as the peer's probe waits: polled in the page (one round trip, not one
  // per 50 ms tick) and carried over a navigation. Its poller awaits a promise result, as our
  // evaluate does; every 16 ms (about a frame) rather than on animation frames, which not every
  // engine runs.
  wait_for_function: async (s, step, state) => {
    await s.page.waitForFunction(pageExpression(step.expression), { timeout: state.budget.wait(step.timeout_ms), polling: 16 });
    return true;
  },
  select_option: async (s, step, state) => { await element(s, step, state); return (await s.page.select(step.selector, step.value)).join(','); },
  // reads act on the page as it is now ($eval fails at once when nothing matches)
  text_content: (s, step) => s.page.$eval(step.selector, (e) => e.textContent),
  inner_text: (s, step) => s.page.$eval(step.selector, (e) => e.innerText),
  input_value: (s, step) => s.page.$eval(step.selector, (e) => e.value),
  is_checked: (s, step) => s.page.$eval(step.selector, (e) => !!e.checked),
  is_enabled: (s, step) => s.page.$eval(step.selector, (e) => !e.disabled),
  get_attribute: (s, step) => s.page.$eval(step.selector, (e, name) => e.getAttribute(name), step.name),
  is_visible: async (s, step) => { const handle = await s.page.$(step.selector); return handle ? handle.isVisible() : false; },
  count: async (s, step) => (await s.page.$$(step.selector)).length,
  contexts_count: (s) => s.browser.browserContexts().length,
  set_input_files: async (s, step, state) => { await (await element(s, step, state)).uploadFile(step.path); return step.path; },
  wait_for_selector: async (s, step, state) => {
    const visibility = { visible: { visible: true }, hidden: { hidden: true } }[step.state] || {};
    await s.page.waitForSelector(step.selector, { ...visibility, ...t(state, step) });
    return true;
  },
  frame_evaluate: (s, step) => framesMatching(s.page.frames(), step.url_contains).evaluate(step.expression),
  route_fulfill: (s, step) => addRoute(s, step, (r) => r.respond({ status: step.status || 200, contentType: step.content_type, body: step.body })),
  route_abort: (s, step) => addRoute(s, step, (r) => r.abort()),
  set_extra_headers: async (s, step) => { await s.page.setExtraHTTPHeaders(step.headers); return Object.keys(step.headers).join(','); },
  set_cookie: async (s, step) => { await s.page.setCookie({ name: step.name, value: step.value, url: step.url }); return step.name; },
  get_cookies: (s, step) => s.page.cookies(step.url),
  download,
  aria_snapshot: async (s, step, state) => s.page.accessibility.snapshot({ root: await element(s, step, state) }),
  version: (s) => s.browser.version(),
});

main({ key: 'puppeteer', name: `puppeteer-core ${require('puppeteer-core/package.json').version}`, connect, liveProduct, close, ops });
