#!/usr/bin/env node
'use strict';
// The agent-browser tool-probe path (subset l1.agent_browser_tool, driver node_cdp_probe with
// script l1_ab_probe.js): metewand's own runner for those tasks, written from their format.
// A task carries its CLI calls in driver.env.AB_STEPS ({"ab": [args]}, or {"eval": js,
// "save_as": name}) and its verdict in AB_CHECKS (ab_ok, ab_data_contains, saved_equals, ...).
// Every CLI call goes through agent_browser.js's invocation: --cdp <browser_ws> on every command,
// a private HOME and session, the live gate, and a close that ends the daemon (a daemon started
// without --cdp would launch a Chrome of its own).

const fs = require('fs');
const path = require('path');
const { main } = require('./common');
const { VERSION, ab, connect, liveProblem, close } = require('./agent_browser');

const REF_TOKEN = /\{ref:([^}]*)\}/g;
const TMP_FILE_TOKEN = /\{tmp_file:([^:}]+):([^}]*)\}/g;

// The plan of the attempt being run; the check kinds below read it (attempts run one at a time
// per adapter process, also in --serve mode).
let current = { steps: [] };

// {tmp_file:NAME:CONTENT}: a file the task uploads, written into the attempt's artifact dir.
function tmpFiles(text, payload) {
  return text.replace(TMP_FILE_TOKEN, (whole, name, content) => {
    const dir = path.join(payload.artifact_dir || fs.mkdtempSync('/tmp/mw-abtool-'), 'tmp_files');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, path.basename(name));
    fs.writeFileSync(file, content);
    return file;
  });
}

function plan(payload) {
  const env = payload.driver_env || {};
  const steps = (env.AB_STEPS || []).map((step, index) => {
    if (Array.isArray(step.ab)) {
      const args = step.ab.map((a) => tmpFiles(String(a), payload));
      return { op: 'ab', index, args, ignore_error: !!step.ignore_error, timeout_ms: step.timeout_ms };
    }
    if (typeof step.eval === 'string') return { op: 'eval', index, expression: step.eval, save_as: step.save_as, timeout_ms: step.timeout_ms };
    return { op: `unknown step ${JSON.stringify(Object.keys(step))}`, index };
  });
  current = { steps };
  return { steps, checks: env.AB_CHECKS || [] };
}

// {ref:role=button,name=Increment}: the @ref of the latest snapshot's first matching element.
function resolveRefs(arg, session) {
  return arg.replace(REF_TOKEN, (whole, spec) => {
    const want = Object.fromEntries(spec.split(',').map((kv) => kv.split('=')).map(([k, ...v]) => [k.trim(), v.join('=').trim()]));
    const refs = session.refs;
    if (!refs) throw new Error(`${whole}: no snapshot taken before this step`);
    const found = Object.entries(refs).find(([, el]) => Object.entries(want).every(([k, v]) => String((el || {})[k] ?? '') === v));
    if (!found) throw new Error(`${whole}: no element in the last snapshot matches`);
    return `@${found[0]}`;
  });
}

// A failed step (not marked ignore_error) ends the probe: later steps are reported not run.
async function guardedStep(session, step, run) {
  if (session.stoppedAt !== undefined) throw new Error(`not run: step ${session.stoppedAt} failed`);
  try {
    return await run();
  } catch (e) {
    if (!step.ignore_error) session.stoppedAt = step.index;
    throw e;
  }
}

const ops = {
  ab: (s, step, state) => guardedStep(s, step, async () => {
    const args = step.args.map((a) => resolveRefs(a, s));
    const reply = await ab(s, args, state.budget, step.timeout_ms);
    // the CLI's daemon bookkeeping is not the command's answer: a check must not match in it
    // (launchHash digits would satisfy an expected "2")
    const { lifecycle, ...data } = reply && typeof reply === 'object' ? reply : { value: reply };
    if (args[0] === 'snapshot' && data.refs) s.refs = data.refs;
    return data;
  }),
  eval: (s, step, state) => guardedStep(s, step, async () => (await ab(s, ['eval', step.expression], state.budget, step.timeout_ms)).result),
};

function textOf(value) {
  return typeof value === 'string' ? value : JSON.stringify(value === undefined ? null : value);
}

// Every string leaf, so an expected text with quotes or newlines is found unescaped too.
function leaves(value, out = []) {
  if (typeof value === 'string') out.push(value);
  else if (value && typeof value === 'object') for (const v of Object.values(value)) leaves(v, out);
  return out;
}

function contains(record, expected) {
  if (!record || !record.ok) return false;
  return textOf(record.value).includes(expected) || leaves(record.value).some((t) => t.includes(expected));
}

const stepEvidence = (record, index) => {
  if (!record) return `step ${index} not run`;
  return record.ok ? `step ${index} ok: ${textOf(record.value).slice(0, 200)}` : `step ${index} failed: ${record.error}`;
};

const checkKinds = {
  ab_ok: (c, results) => [!!(results[c.step] && results[c.step].ok), stepEvidence(results[c.step], c.step)],
  ab_fails: (c, results) => {
    const r = results[c.step];
    return [!!r && !r.ok && !String(r.error).startsWith('not run:'), stepEvidence(r, c.step)];
  },
  last_ab_ok: (c, results) => {
    const index = current.steps.map((s) => s.op).lastIndexOf('ab');
    return [index >= 0 && !!(results[index] && results[index].ok), index >= 0 ? stepEvidence(results[index], index) : 'no ab step'];
  },
  ab_data_contains: (c, results) => [contains(results[c.step], c.expected), `${JSON.stringify(c.expected)} in ${stepEvidence(results[c.step], c.step)}`],
  ab_data_not_contains: (c, results) => {
    const r = results[c.step];
    return [!!r && r.ok && !contains(r, c.expected), `${JSON.stringify(c.expected)} absent from ${stepEvidence(r, c.step)}`];
  },
  ab_data_array_min_len: (c, results) => {
    const r = results[c.step];
    const list = r && r.ok ? String(c.path || '').split('.').filter(Boolean).reduce((v, k) => (v == null ? v : v[k]), r.value) : undefined;
    const ok = Array.isArray(list) && list.length >= (c.min || 0);
    return [ok, `${c.path}: ${Array.isArray(list) ? `${list.length} item(s)` : 'no array'} (min ${c.min || 0}); ${r ? (r.ok ? 'step ok' : `step failed: ${r.error}`) : 'step not run'}`];
  },
  ab_refs_nonempty: (c, results) => {
    const r = results[c.step];
    const refs = r && r.ok && r.value ? r.value.refs : null;
    const count = refs && typeof refs === 'object' ? Object.keys(refs).length : 0;
    return [count > 0, `${count} ref(s); ${stepEvidence(r, c.step).slice(0, 120)}`];
  },
};

main({ key: 'agent_browser_tool', name: `agent-browser ${VERSION} (tool probe)`, connect, liveProblem, close, ops, plan, checkKinds, isolations: ['shared'] });
