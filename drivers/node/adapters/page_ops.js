'use strict';
// Ops that Playwright and Puppeteer express the same way once a driver supplies a few
// primitives on the session: `page` (the driver's page), `evaluate(expr)`, and the per-driver
// ops in its own file. Console messages and dialogs are recorded from `new_page` on, so a
// load-time console line is seen like the peer's probe sees it.

const cdpOps = require('./cdp_ops');
const { poll, localOps, digestFile } = require('./common');

// Runs an expression string in the page; a promise result is awaited (as the corpus expects).
function pageExpression(expression) {
  return `(async () => { return await (0, eval)(${JSON.stringify(expression)}); })()`;
}

function commonOps(driverOps) {
  return {
    ...cdpOps,
    ...localOps(),
    evaluate: (s, step) => s.evaluate(step.expression),
    wait_for_function: async (s, step, state) => {
      await poll(state.budget, step.timeout_ms, async () => !!(await s.evaluate(step.expression)), step.expression);
      return true;
    },
    url: (s) => s.page.url(),
    title: (s) => s.page.title(),
    content: (s) => s.page.content(),
    user_agent: async (s) => (s.page ? s.evaluate('navigator.userAgent') : (await s.browserVersion()).userAgent),
    get_console: (s) => s.console.join('\n'),
    get_dialogs: (s) => s.dialogs.join('\n'),
    get_recorded_requests: (s) => s.requests.join('\n'),
    record_requests: (s) => { s.recording = true; return 'recording'; },
    on_dialog: (s, step) => { s.dialogPolicy = { action: step.action || 'accept', text: step.text }; return step.action; },
    count: (s, step) => s.evaluate(`document.querySelectorAll(${JSON.stringify(step.selector)}).length`),
    get_attribute: (s, step) => s.evaluate(
      `(() => { const e = document.querySelector(${JSON.stringify(step.selector)}); if (!e) throw new Error('no element ${step.selector}'); return e.getAttribute(${JSON.stringify(step.name)}); })()`),
    ...driverOps,
  };
}

// Page lifecycle and navigation, spelled alike by Playwright and Puppeteer: they differ only in
// how a browser context is made and what a history move waits for. A navigation op's value is
// the main response's HTTP status (null: no response, e.g. same-document).
function navigationOps(newContext, historyWait) {
  const status = (response) => (response ? response.status() : null);
  const t = (state, step) => ({ timeout: state.budget.wait(step.timeout_ms) });
  return {
    new_page: async (s) => {
      s.context = s.context || await attemptContext(s, newContext); // a second page is a second tab
      s.page = await s.context.newPage();
      s.pages = [...(s.pages || []), s.page];
      s.page.on('console', (m) => s.console.push(`${m.type()}:${m.text()}`));
      s.page.on('dialog', (d) => recordDialog(s, d));
      s.page.on('request', (r) => { if (s.recording) s.requests.push(`${r.method()} ${r.url()}`); });
      return 'page';
    },
    close_page: async (s) => {
      await s.page.close();
      s.pages = s.pages.filter((p) => p !== s.page);
      s.page = s.pages[s.pages.length - 1];
      return 'closed';
    },
    goto: async (s, step, state) => status(await s.page.goto(step.url, t(state, step))),
    reload: async (s, step, state) => status(await s.page.reload(t(state, step))),
    // A back-forward-cache restore fires no load event: a history move waits for less.
    go_back: async (s, step, state) => status(await s.page.goBack({ ...t(state, step), waitUntil: historyWait })),
    go_forward: async (s, step, state) => status(await s.page.goForward({ ...t(state, step), waitUntil: historyWait })),
  };
}

// The attempt's context: its own (context isolation) or the engine's default one (shared).
async function attemptContext(s, newContext) {
  if (s.isolation === 'shared') return s.defaultContext();
  s.ownContext = true;
  return newContext(s);
}

// The end of an attempt: its own context goes with its pages; in the shared default context,
// only the pages the attempt opened are closed.
async function closeAttemptPages(s) {
  if (s.ownContext) return s.context.close();
  for (const page of s.pages || []) {
    try { await page.close(); } catch (e) { process.stderr.write(`close page: ${e.message}\n`); }
  }
  return undefined;
}

function recordDialog(session, dialog) {
  session.dialogs.push(`${dialog.type()}:${dialog.message()}`);
  const policy = session.dialogPolicy || { action: 'dismiss' };
  const answered = policy.action === 'accept' ? dialog.accept(policy.text) : dialog.dismiss();
  // An engine that cannot answer a dialog fails the task's later steps, not the adapter.
  return Promise.resolve(answered).catch((e) => { session.dialogs.push(`answer-failed:${e.message}`); });
}

function framesMatching(frames, urlPart) {
  const frame = frames.find((f) => f.url().includes(urlPart));
  if (!frame) throw new Error(`no frame whose url contains ${urlPart}`);
  return frame;
}

module.exports = { commonOps, navigationOps, closeAttemptPages, pageExpression, recordDialog, digestFile, framesMatching };
