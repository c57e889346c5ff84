'use strict';
// The part every Node adapter shares: read the abb_scenario_adapter/1 payload, check the binding
// gate, run the ops through one driver's op table, grade the checks, print one result.
// A driver file supplies { name, connect(payload, budget), ops, liveProduct(session), close }.
// Driver-op marks (metewand's addition beside the contract): a payload carrying metewand_mark_fd
// names an inherited pipe; one line is written to it at each boundary (driver_connect, op<i>:<op>
// before each op, driver_close after the last), carrying the engine's counters where the payload
// names their files (metewand_mark_reads; else the harness reads them as the line arrives).
// Without the key nothing is written.

const fs = require('fs');
const path = require('path');

const RESERVE_MS = 500; // kept back from the task budget so the result is always printed

// stdout carries exactly one result: a library's console.log goes to stderr with the diagnostics.
console.log = console.info = console.debug = (...args) => console.error(...args);
// A driver's stray rejected promise (an event handler the engine answered with an error) is a
// diagnostic, not an adapter crash: the steps still decide the result.
process.on('unhandledRejection', (reason) => console.error('unhandled rejection:', reason));

function readPayload() {
  return JSON.parse(fs.readFileSync(0, 'utf8'));
}

class Budget {
  constructor(payload) {
    this.end = Date.now() + (payload.task_timeout_ms || 30000) - RESERVE_MS;
    this.actionMs = payload.action_timeout_ms || 8000;
  }
  remaining() { return Math.max(0, this.end - Date.now()); }
  // One op's wait: its own limit, never past the attempt's budget.
  wait(ms) { return Math.max(1, Math.min(ms || this.actionMs, this.remaining())); }
}

function pageTokens(payload) {
  const url = new URL(payload.task_url);
  return {
    '{fixture_url}': payload.task_url,
    '{fixture_origin}': url.origin,
    '{fixture_host}': url.host,
    '{artifact_dir}': payload.artifact_dir || '',
  };
}

function substitute(value, tokens) {
  if (typeof value === 'string') {
    let out = value;
    for (const [token, text] of Object.entries(tokens)) out = out.split(token).join(text);
    return out;
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, tokens));
  if (value && typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = substitute(v, tokens);
    return out;
  }
  return value;
}

function stringify(value) {
  if (value === undefined) return 'undefined';
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

const FALSY_TEXT = new Set(['', 'false', 'undefined', 'null', '0']);

function evaluateCheck(check, steps, saved, extra) {
  const kind = check.kind;
  const step = steps[check.step];
  switch (kind) {
    case 'step_ok':
      return step && step.ok ? [true, 'step ok'] : [false, step ? `step failed: ${step.error}` : 'step not run'];
    case 'step_fails':
      return step && !step.ok ? [true, `step failed as expected: ${step.error}`] : [false, step ? 'step succeeded' : 'step not run'];
    case 'saved_equals':
      return [saved[check.name] === check.expected, `saved ${check.name}=${JSON.stringify(saved[check.name])}`];
    case 'saved_contains':
      return [typeof saved[check.name] === 'string' && saved[check.name].includes(check.expected), `saved ${check.name}=${JSON.stringify(saved[check.name])}`];
    case 'saved_not_contains':
      return [typeof saved[check.name] === 'string' && !saved[check.name].includes(check.expected), `saved ${check.name}=${JSON.stringify(saved[check.name])}`];
    case 'saved_truthy':
      return [check.name in saved && !FALSY_TEXT.has(saved[check.name]) && !saved[check.name].startsWith('ERROR:'), `saved ${check.name}=${JSON.stringify(saved[check.name])}`];
    case 'file_nonempty': {
      let size = 0;
      try { size = fs.statSync(check.path).size; } catch (e) { return [false, `no file ${check.path}`]; }
      return [size > 0, `${check.path}: ${size} bytes`];
    }
    case 'any_of': {
      const parts = (check.any_of || check.checks || []).map((c) => evaluateCheck(c, steps, saved, extra));
      return [parts.some((p) => p[0]), parts.map((p) => p[1]).join(' | ')];
    }
    default:
      // a driver's own check kinds (the agent-browser tool probe's ab_ok, ab_data_contains, ...)
      if (extra && extra[kind]) return extra[kind](check, steps, saved);
      return [false, `unknown check kind ${kind}`];
  }
}

// node:http, not the global fetch: fetch loads undici on first use (~25 ms of CPU per adapter
// process, measured), which a per-attempt adapter would pay on every attempt.
function fetchJsonVersion(port, budget) {
  return new Promise((resolve, reject) => {
    const request = require('http').get({ host: '127.0.0.1', port, path: '/json/version', timeout: budget.wait(5000) }, (reply) => {
      let body = '';
      reply.setEncoding('utf8');
      reply.on('data', (chunk) => { body += chunk; });
      reply.on('end', () => { try { resolve(JSON.parse(body)); } catch (e) { reject(new Error(`invalid JSON from /json/version: ${e.message}`)); } });
    });
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('error', reject);
  });
}

// The binding gate: the endpoint is the engine the runner named, or the adapter refuses to run.
function httpIdentityProblem(payload, version) {
  if (payload.expect_product && version.Browser !== payload.expect_product) {
    return `/json/version Browser ${JSON.stringify(version.Browser)} != expected ${JSON.stringify(payload.expect_product)}`;
  }
  if (payload.expect_ua && version['User-Agent'] !== payload.expect_ua) {
    return `/json/version User-Agent differs from the expected one`;
  }
  if (version.webSocketDebuggerUrl && version.webSocketDebuggerUrl !== payload.browser_ws) {
    return `/json/version webSocketDebuggerUrl ${version.webSocketDebuggerUrl} != browser_ws ${payload.browser_ws}`;
  }
  return null;
}

// The op trace (cdp.jsonl beside the attempt's artifacts, best effort by contract): records are
// kept in memory and written once when the attempt ends, not opened and appended per op.
function opTrace(payload) {
  const records = [];
  return {
    add: (record) => { if (payload.artifact_dir) records.push(record); },
    flush: () => {
      if (!records.length) return;
      try {
        fs.mkdirSync(payload.artifact_dir, { recursive: true });
        fs.appendFileSync(path.join(payload.artifact_dir, 'cdp.jsonl'), records.map((r) => JSON.stringify(r)).join('\n') + '\n');
      } catch (e) { /* tracing is best effort by contract */ }
    },
  };
}

// The harness's mark channel for this payload, or null when it asked for no marks. Where the
// payload also names files (metewand_mark_reads: the engine's accounting group), each mark reads
// them here, at the op boundary, then the monotonic clock, and writes their bytes down the line
// ("|" for a newline, "!<code>" for a failed read): the harness then reads the pipe once, after
// the result, instead of waking at every op to read them itself.
function opMarks(payload) {
  const fd = payload.metewand_mark_fd;
  if (!Number.isInteger(fd) || fd <= 2) return null; // no one listens: no mark machinery
  const reads = markReads(payload.metewand_mark_reads);
  const mark = (name) => {
    // one write per line (atomic on a pipe); a full pipe drops the mark, never blocks the op
    // the harness takes plain names only: any other character becomes "_"
    const plain = String(name).replace(/[^A-Za-z0-9_.:-]/g, '_').slice(0, 120);
    const line = reads ? `${plain}\t${reads.read()}\n` : `${plain}\n`;
    try { fs.writeSync(fd, line); } catch (e) { /* the harness reads what it can */ }
  };
  mark.close = () => { if (reads) reads.close(); };
  return mark;
}

// The files a mark reads, opened once for the attempt (a pread each at the mark, no open).
function markReads(plan) {
  if (!Array.isArray(plan)) return null;
  const files = plan.map(openRead);
  const buffer = Buffer.allocUnsafe(Math.max(64, ...files.map((f) => f.size)));
  return {
    read: () => {
      const fields = files.map((file) => readField(file, buffer));
      return `${process.hrtime.bigint()}\t${fields.join('\t')}`;
    },
    close: () => files.forEach((file) => { if (file.fd !== null) try { fs.closeSync(file.fd); } catch (e) { /* gone */ } }),
  };
}

function openRead(entry) {
  const restart = typeof entry.restart === 'string' ? entry.restart : null;
  const file = { fd: null, size: Math.min(Number(entry.size) || 4096, 1 << 20), restart, error: 'EIO' };
  try {
    file.fd = fs.openSync(String(entry.path), restart ? 'r+' : 'r');
    // a high-water kept per descriptor starts its first window now
    if (restart && entry.restart_at_open) fs.writeSync(file.fd, restart, 0);
  } catch (e) {
    if (file.fd !== null) try { fs.closeSync(file.fd); } catch (e2) { /* gone */ }
    file.fd = null;
    file.error = e.code || 'EIO';
  }
  return file;
}

function readField(file, buffer) {
  if (file.fd === null) return `!${file.error}`;
  try {
    const n = fs.readSync(file.fd, buffer, 0, file.size, 0);
    if (file.restart) fs.writeSync(file.fd, file.restart, 0); // the next window starts now
    return buffer.toString('latin1', 0, n).replace(/\n/g, '|');
  } catch (e) {
    return `!${e.code || 'EIO'}`;
  }
}

function harnessError(cls, message) {
  return { ok: false, error: { class: cls, message } };
}

// The op vocabulary's refusals (drivers/ops.json), read only when a step names an op this
// driver's table lacks: an op the library cannot express fails with its named reason.
let vocabulary = null;
function opsMatrix() {
  if (vocabulary === null) {
    try { vocabulary = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'ops.json'), 'utf8')); } catch (e) { vocabulary = {}; }
  }
  return vocabulary;
}

function missingOp(driver, op) {
  const matrix = opsMatrix();
  const entry = (matrix.ops || []).find((o) => o.op === op);
  if (!entry) return `unknown op ${op}`;
  const cell = (entry.cells || {})[driver.key] || {};
  const library = ((matrix.paths || {})[driver.key] || {}).library || driver.key;
  return `unsupported op: ${op} (${library} cannot ${cell.cannot || 'do this in this adapter'})`;
}

// Ops that need no page: they run even after a new_page failed.
const PAGELESS = new Set(['new_page', 'wait_ms', 'version', 'user_agent', 'contexts_count', 'write_file', 'get_console', 'get_dialogs', 'get_recorded_requests']);

async function runSteps(driver, session, steps, payload, budget, mark = null) {
  const results = [];
  const saved = {};
  const state = { saved, payload, budget };
  const tracer = opTrace(payload);
  let pageLost = null; // the failed new_page later page ops would otherwise run on the old page of
  for (const [index, step] of steps.entries()) {
    if (mark) mark(`op${index}:${step.op}`);
    const started = Date.now();
    const op = driver.ops[step.op];
    let record;
    if (!op) {
      record = { ok: false, error: missingOp(driver, step.op) };
    } else if (pageLost && !PAGELESS.has(step.op)) {
      record = { ok: false, error: pageLost };
    } else if (budget.remaining() <= 1) {
      record = { ok: false, error: 'task budget exhausted before this op' };
    } else {
      try {
        record = { ok: true, value: await op(session, step, state) };
      } catch (e) {
        record = { ok: false, error: String((e && e.message) || e).split('\n')[0] };
      }
    }
    if (step.op === 'new_page') pageLost = record.ok ? null : `no page: new_page at step ${index} failed (${record.error})`;
    if (step.save_as) saved[step.save_as] = record.ok ? stringify(record.value) : `ERROR: ${record.error}`;
    results.push(record);
    tracer.add({ step: index, op: step.op, ok: record.ok, ms: Date.now() - started, error: record.error });
  }
  tracer.flush();
  return { results, saved };
}

function grade(checks, results, saved, extra) {
  return checks.map((check) => {
    const [ok, evidence] = evaluateCheck(check, results, saved, extra);
    return { name: check.label || check.kind, status: ok ? 'pass' : 'fail', evidence };
  });
}

// Where the attempt's pages go: the payload's isolation (context: a browser context of the
// attempt's own; shared: the engine's default context) when the driver can open pages there,
// else the one way its library opens them (driver.isolations, that way first). The result says
// which, so the row never claims an isolation the attempt did not have.
function isolationFor(driver, payload) {
  const able = driver.isolations || ['context', 'shared'];
  return able.includes(payload.isolation) ? payload.isolation : able[0];
}

async function attempt(driver, payload) {
  const mark = opMarks(payload);
  try {
    return await markedAttempt(driver, payload, mark);
  } finally {
    if (mark) mark.close();
  }
}

async function markedAttempt(driver, payload, mark) {
  if (payload.protocol !== 'abb_scenario_adapter/1') {
    return harnessError('script_error', `unsupported protocol ${JSON.stringify(payload.protocol)}`);
  }
  const budget = new Budget(payload);
  let version;
  try {
    version = await fetchJsonVersion(payload.cdp_port, budget);
  } catch (e) {
    return harnessError('script_error', `GET /json/version failed: ${e.message}`);
  }
  const problem = httpIdentityProblem(payload, version);
  if (problem) return harnessError('script_error', `binding gate: ${problem}`);
  const tokens = pageTokens(payload);
  // A driver whose tasks carry their steps elsewhere (the probe env's AB_STEPS) plans them.
  const planned = driver.plan ? driver.plan(payload) : payload;
  const steps = substitute(planned.steps || [], tokens);
  const checks = substitute(planned.checks || [], tokens);
  const connectRow = { name: 'driver_connect', status: 'pass', evidence: driver.name };
  if (mark) mark('driver_connect');
  let session;
  try {
    session = await driver.connect(payload, budget);
    session.isolation = isolationFor(driver, payload);
  } catch (e) {
    // An engine the driver cannot attach to is a benchmark result, not a harness problem.
    connectRow.status = 'fail';
    connectRow.evidence = `connect failed: ${e.message}`;
    const failed = checks.map((c) => ({ name: c.label || c.kind, status: 'fail', evidence: 'driver not connected' }));
    return { ok: true, answer: `0/${failed.length + 1} checks`, observations: { checks: [connectRow, ...failed], saved: {}, failure_class: 'cdp_semantic' } };
  }
  try {
    // The live gate: Browser.getVersion through the driver's own transport, or the driver's own
    // check where it exposes no raw CDP (liveProblem).
    let live = null;
    if (driver.liveProblem) {
      const problemLive = await driver.liveProblem(session, payload, version);
      if (problemLive) return harnessError('script_error', `binding gate: ${problemLive}`);
    } else {
      live = await driver.liveProduct(session, budget);
      if (payload.expect_product_live && live !== payload.expect_product_live) {
        return harnessError('script_error', `binding gate: live product ${JSON.stringify(live)} != ${JSON.stringify(payload.expect_product_live)}`);
      }
    }
    const { results, saved } = await runSteps(driver, session, steps, payload, budget, mark);
    if (mark) mark('driver_close'); // the checks, the session's close, the result
    const rows = [connectRow, ...grade(checks, results, saved, driver.checkKinds)];
    const passed = rows.filter((r) => r.status === 'pass').length;
    const observations = { checks: rows, saved, binding: { verified: true, http_product: version.Browser, live_product: live, live_check: driver.liveProblem ? 'navigator.userAgent' : 'Browser.getVersion' } };
    if (passed !== rows.length) observations.failure_class = 'cdp_semantic';
    return { ok: true, answer: `${passed}/${rows.length} checks`, observations, metrics: session.metrics || {}, isolation: session.isolation };
  } finally {
    try { await driver.close(session); } catch (e) { process.stderr.write(`close: ${e.message}\n`); }
  }
}

// The entry point of every adapter file: exactly one JSON object reaches stdout per payload.
// One-shot (the contract's default): one payload on stdin up to EOF, one result, exit.
// `--serve` (metewand's long-lived mode): one payload per stdin line, one result line each, in
// order, until stdin closes. Every attempt still connects, opens its own context/page and
// closes them again; only the process and the loaded client library are shared.
async function main(driver) {
  if (process.argv.includes('--list-ops')) {
    process.stdout.write(JSON.stringify(Object.keys(driver.ops).sort()) + '\n', () => process.exit(0));
    return undefined;
  }
  if (process.argv.includes('--serve')) return serve(driver);
  const result = await guarded(driver, () => readPayload());
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0));
}

async function guarded(driver, payloadOf) {
  let payload = null;
  let result;
  try {
    payload = payloadOf();
    result = await attempt(driver, payload);
  } catch (e) {
    process.stderr.write(`${(e && e.stack) || e}\n`);
    result = harnessError('script_error', String((e && e.message) || e));
  }
  // the runner credits a result only to the attempt whose id it echoes
  if (payload && typeof payload === 'object' && 'attempt_id' in payload) result.attempt_id = payload.attempt_id;
  return result;
}

async function serve(driver) {
  const lines = require('readline').createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const result = await guarded(driver, () => JSON.parse(line));
    await new Promise((resolve) => process.stdout.write(JSON.stringify(result) + '\n', resolve));
  }
  process.exit(0);
}

// Helpers used by several op tables.
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Probes every 50 ms until it answers. `wake` (optional) returns a promise of the next event the
// probe waits on: the probe then runs again as soon as that arrives instead of at the next tick
// (a load event lands a few ms after Page.navigate answers; polling alone paid ~50 ms for it).
// It is taken before the probe runs, so an event that lands during the probe is not missed.
async function poll(budget, limitMs, probe, what, wake) {
  const end = Date.now() + budget.wait(limitMs);
  for (;;) {
    const woken = wake ? wake() : null;
    const value = await probe();
    if (value) return value;
    if (Date.now() >= end) throw new Error(`timed out waiting for ${what}`);
    await (woken ? sleepOr(50, woken) : sleep(50));
  }
}

async function sleepOr(ms, woken) {
  let timer;
  const slept = new Promise((resolve) => { timer = setTimeout(resolve, ms); });
  try { await Promise.race([slept, woken]); } finally { clearTimeout(timer); }
}

// Playwright-style URL globs, as the corpus writes them: ** crosses '/', * does not, ? is one char.
function globToRegExp(glob) {
  let out = '';
  for (let i = 0; i < glob.length; i += 1) {
    if (glob[i] === '*' && glob[i + 1] === '*') { out += '.*'; i += 1; } else if (glob[i] === '*') out += '[^/]*';
    else if (glob[i] === '?') out += '.';
    else out += glob[i].replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${out}$`);
}

// A route or recording pattern matches a URL: a glob when it has wildcards, else a substring.
function urlMatches(url, pattern) {
  if (!pattern) return true;
  return /[*?]/.test(pattern) ? globToRegExp(pattern).test(url) : url.includes(pattern);
}

// Ops every adapter spells alike: they touch the adapter's own state or the file system only.
function localOps() {
  return {
    wait_ms: async (s, step, state) => { await sleep(Math.min(step.ms || 0, state.budget.remaining())); return step.ms; },
    write_file: (s, step) => { fs.mkdirSync(path.dirname(step.path), { recursive: true }); fs.writeFileSync(step.path, step.content || ''); return step.path; },
  };
}

function digestFile(file) {
  const bytes = fs.readFileSync(file);
  return `${require('crypto').createHash('sha256').update(bytes).digest('hex').slice(0, 12)}:${bytes.length}`;
}

// A script reading the element as the page is now: one that is not there fails at once.
function elementNow(selector, expression) {
  return `(() => { const e = document.querySelector(${JSON.stringify(selector)});
  if (!e) throw new Error(${JSON.stringify(`no element matches ${selector}`)}); return ${expression}; })()`;
}

// The element read ops over one primitive, read(expression) -> op (expression of the element `e`).
function elementReads(read) {
  return {
    text_content: read('e.textContent'),
    inner_text: read('e.innerText'),
    input_value: read('e.value'),
    is_checked: read('!!e.checked'),
    is_enabled: read('!e.disabled'),
    get_attribute: (s, step, state) => read(`e.getAttribute(${JSON.stringify(step.name)})`)(s, step, state),
  };
}

module.exports = { main, stringify, sleep, poll, substitute, globToRegExp, urlMatches, localOps, digestFile, elementNow, elementReads };
