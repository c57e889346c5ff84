"""False alarms and power of ``metewand compare`` on real runs of the sorting example (issue #22).

What it runs (the example as shipped: 15 groups, of 20 repetitions and 10 for presorted), every
figure printed with the host's load average (1/5/15 min) before and after the runs it comes from:

1. **A/A of separate runs**: ``--pairs`` pairs of runs of the unchanged example; in the first
   ``--polluted`` pairs a niced CPU burner (``nice -n 19``, one core) runs beside one of the two
   runs. Per pair, ``compare --fail-on-regression`` on the default wall metric and on
   ``--metric cpu_time_ns`` (exit codes), and the group verdicts of both metrics.
   Acceptance: no exit 1; a polluted pair's wall gate refuses with 2 and its CPU gate exits 0;
   at most 1 group-level false alarm over all groups (quiet pairs on the default metric,
   polluted pairs on CPU).
2. **A/A interleaved**: ``--ab-runs`` runs with ``--ab-baseline`` pointing at an identical copy of
   the tree; ``compare --ab``. Acceptance: 0 false alarms.
3. **A planted slowdown**: ``python-heapsort`` burns +20% of its own execute CPU
   (``benchmarks/planted.py``, a loop calibrated by the CPU the execute just spent). Separate
   runs of the planted tree are compared with the A/A pairs' quiet runs (not the burner's); interleaved A/B runs of
   the planted tree against the unchanged one. Acceptance: detected in >= 90% of heapsort's
   groups interleaved, >= 80% separate, no other implementation flagged.

4. **The browser suite**: an A/A of two runs of the built-in suite (chrome and lightpanda, k=8;
   the loop corpus below with ``--quick``), and a planted slowdown: a corpus of six pages doing
   fixed JS work, run twice, the NEW run with a Chrome whose pages do 50% more work (a wrapper
   binary that marks its user agent; each page picks its work by it). Both runs hold both
   engines, alternating as always, and the corpus is the same, so Lightpanda's groups are
   unchanged in identity as in work: ``compare`` reads Chrome against them as controls, and reads
   the spread between runs across them. (A Lightpanda run of its own, as this benchmark first
   did, ran it beside no Chrome and was flagged for that.) On duration_ms and engine_cpu_ns.

Separate-run comparisons are judged twice: with ``--no-history`` (each pair alone) and with the
work dir's run history, from which a side of one run borrows each group's between-run spread
(the runs that started before BASE; the first pairs have too few). The interleaved A/A is
paired and reads no history.

The host's own pollution gate is reported per run: on a shared machine a "quiet" pair may well
have been polluted by others, and the figures say so rather than hide it.

    .venv/bin/python benchmarks/compare_false_alarms.py            # the full acceptance run
    .venv/bin/python benchmarks/compare_false_alarms.py --quick    # 1 of each: does it work?
    .venv/bin/python benchmarks/compare_false_alarms.py --keep --out /tmp/cfa   # keep the runs
    .venv/bin/python benchmarks/compare_false_alarms.py --reanalyze /tmp/cfa  # judge them again

Runs are recorded in ``WORK/runs.json`` as they finish; ``--out`` on a kept work dir reuses its
runs and makes only the missing ones.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from planted import plant_slowdown  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "sorting"
PLANTED_IMPLEMENTATION = "python-heapsort"
PLANTED_FRACTION = 0.20
CPU = "cpu_time_ns"
WALL = "timed_wall_time_ns"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


@dataclass
class Run:
    run_id: str
    kind: str  # aa | ab | planted | planted_ab | browser
    burner: bool = False
    load_before: str = ""
    load_after: str = ""
    seconds: float = 0.0
    gate_passed: bool | None = None
    conditions: list[str] = field(default_factory=list)


class Ledger:
    """The runs made so far, in ``work/runs.json`` after each one: the figures are judged from
    it (``--reanalyze`` judges a kept work dir again without running anything)."""

    def __init__(self, work: Path) -> None:
        self.path = work / "runs.json"
        self.runs: dict[str, Run] = {}
        if self.path.exists():
            self.runs = {r["run_id"]: Run(**r) for r in json.loads(self.path.read_text())}

    def add(self, run: Run) -> Run:
        self.runs[run.run_id] = run
        self.path.write_text(json.dumps([r.__dict__ for r in self.runs.values()], indent=1))
        return run


def metewand(
    *args: Any, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "metewand", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if check and done.returncode not in (0,):
        raise SystemExit(
            f"metewand {' '.join(map(str, args))}: exit {done.returncode}\n{done.stderr[-3000:]}"
        )
    return done


def _gate(run: Run, run_dir: Path) -> None:
    summary = json.loads((run_dir / "host_summary.json").read_text())
    gate = summary.get("gate") or {}
    run.gate_passed = gate.get("passed")
    run.conditions = [t["condition"] for t in gate.get("triggered") or []]


def run_tree(
    ledger: Ledger, work: Path, tree: Path, run: Run, ab_baseline: Path | None = None
) -> Run:
    """One run of ``tree``'s manifest (a niced CPU burner beside it when asked); kept runs are
    not run again."""
    if run.run_id in ledger.runs:
        return ledger.runs[run.run_id]
    run.load_before = load()
    hog = None
    if run.burner:
        hog = subprocess.Popen(
            ["nice", "-n", "19", sys.executable, "-c", "while True: pass"], start_new_session=True
        )
    started = time.monotonic()
    try:
        args = [
            "run",
            tree / "metewand.toml",
            "--run-id",
            run.run_id,
            "--out",
            work / "runs",
            "--cache-dir",
            work / "cache",
            "--quiet",
        ]
        if ab_baseline is not None:
            args += ["--ab-baseline", ab_baseline]
        metewand(*args)
    finally:
        if hog is not None:
            os.killpg(hog.pid, signal.SIGKILL)
            hog.wait()
    run.seconds, run.load_after = time.monotonic() - started, load()
    _gate(run, work / "runs" / run.run_id)
    print(
        f"  run {run.run_id:12} {run.seconds:6.0f} s  burner={'yes' if run.burner else 'no ':3}  "
        f"host gate {'passed' if run.gate_passed else 'FAILED'} {','.join(run.conditions)}  "
        f"load {run.load_before} -> {run.load_after}",
        flush=True,
    )
    return ledger.add(run)


def verdicts(result: dict[str, Any]) -> dict[tuple[str, str], str]:
    first, second = result["group_names"]
    return {(g[first], g[second]): g["verdict"] for g in result["groups"]}


# what every separate-run comparison adds: ["--no-history"], or [] to let it borrow each group's
# between-run spread from the work dir's history (the runs add themselves to it); see judge()
HISTORY_ARGS: list[str] = []


def compared(*args: Any) -> dict[str, Any]:
    extra = [] if "--ab" in args else HISTORY_ARGS
    return json.loads(metewand("compare", *args, *extra, "--json").stdout)


def gate_exit(*args: Any) -> int:
    extra = [] if "--ab" in args else HISTORY_ARGS
    return metewand("compare", *args, *extra, "--fail-on-regression", check=False).returncode


def alarms(found: dict[Any, str]) -> int:
    return sum(v in ("slower", "faster") for v in found.values())


def collect_compute(ledger: Ledger, work: Path, args: argparse.Namespace) -> None:
    """Every compute run the figures need (the A/A pairs, the A/B runs, the planted runs)."""
    tree, twin = work / "tree", work / "twin"
    for copy in (tree, twin):
        if not copy.exists():
            shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("runs"))
    planted = work / "planted"
    if not planted.exists():
        plant_slowdown(EXAMPLE, PLANTED_IMPLEMENTATION, PLANTED_FRACTION, planted)
    print(
        f"== A/A of separate runs: {args.pairs} pairs, a burner beside one run of "
        f"{args.polluted}; interleaved A/A: {args.ab_runs} runs",
        flush=True,
    )
    for i in range(args.pairs):
        burn = i < args.polluted
        run_tree(ledger, work, tree, Run(f"aa{i}a", "aa", burner=burn and i % 2 == 0))
        run_tree(ledger, work, tree, Run(f"aa{i}b", "aa", burner=burn and i % 2 == 1))
    for i in range(args.ab_runs):
        run_tree(ledger, work, tree, Run(f"ab{i}", "ab"), ab_baseline=twin)
    print(
        f"== planted: {PLANTED_IMPLEMENTATION} +{PLANTED_FRACTION:.0%} of its execute CPU",
        flush=True,
    )
    for i in range(args.planted_pairs):
        run_tree(ledger, work, planted, Run(f"pl{i}", "planted"))
    for i in range(args.planted_ab_runs):
        run_tree(ledger, work, planted, Run(f"plab{i}", "planted_ab"), ab_baseline=tree)


def judge_aa(ledger: Ledger, work: Path) -> list[dict[str, Any]]:
    """Per A/A pair: both gates' exit codes and the group false alarms of both metrics."""
    out = []
    for i in range(sum(1 for r in ledger.runs.values() if r.kind == "aa") // 2):
        a, b = ledger.runs[f"aa{i}a"], ledger.runs[f"aa{i}b"]
        pa, pb = work / "runs" / a.run_id, work / "runs" / b.run_id
        wall, cpu = compared(pa, pb), compared(pa, pb, "--metric", CPU)
        entry = {
            "pair": i,
            "burner": a.burner or b.burner,
            "gates_passed": [a.gate_passed, b.gate_passed],
            "wall_exit": gate_exit(pa, pb),
            "cpu_exit": gate_exit(pa, pb, "--metric", CPU),
            "wall_alarms": alarms(verdicts(wall)),
            "cpu_alarms": alarms(verdicts(cpu)),
            "groups": len(wall["groups"]),
            "load": f"{a.load_before} -> {b.load_after}",
        }
        out.append(entry)
        print(
            f"  A/A pair {i}: burner={entry['burner']}  wall gate exit {entry['wall_exit']}, CPU "
            f"gate exit {entry['cpu_exit']}; false alarms wall {entry['wall_alarms']}, CPU "
            f"{entry['cpu_alarms']} of {entry['groups']} groups  (load {entry['load']})",
            flush=True,
        )
    return out


def judge_ab(ledger: Ledger, work: Path) -> list[dict[str, Any]]:
    out = []
    for run in (r for r in ledger.runs.values() if r.kind == "ab"):
        path = work / "runs" / run.run_id
        wall, cpu = compared("--ab", path), compared("--ab", path, "--metric", CPU)
        entry = {
            "run": run.run_id,
            "wall_alarms": alarms(verdicts(wall)),
            "cpu_alarms": alarms(verdicts(cpu)),
            "groups": len(wall["groups"]),
            "wall_exit": gate_exit("--ab", path),
            "cpu_exit": gate_exit("--ab", path, "--metric", CPU),
            "not_comparable": wall["counts"].get("not comparable", 0),
            "load": f"{run.load_before} -> {run.load_after}",
        }
        out.append(entry)
        print(
            f"  interleaved A/A {run.run_id}: false alarms wall {entry['wall_alarms']}, CPU "
            f"{entry['cpu_alarms']} of {entry['groups']}; gate exits wall {entry['wall_exit']}, "
            f"CPU {entry['cpu_exit']}  (load {entry['load']})",
            flush=True,
        )
    return out


def detection(result: dict[str, Any]) -> tuple[int, int, int]:
    """(planted groups called slower, planted groups, other groups flagged)."""
    found = verdicts(result)
    planted = [v for (_, impl), v in found.items() if impl == PLANTED_IMPLEMENTATION]
    others = {key: v for key, v in found.items() if key[1] != PLANTED_IMPLEMENTATION}
    return planted.count("slower"), len(planted), alarms(others)


def quiet_base(ledger: Ledger, index: str) -> str:
    """The A/A pair's run without our burner: a planted run judged against a run we polluted on
    purpose reads the burner, not the change (on 2026-12-05 the burner runs made 13 unchanged
    groups "faster" on wall time, 7 on CPU; before, the first run of each pair was the base,
    the burner one in pairs 0, 2 and 4)."""
    first = ledger.runs.get(f"aa{index}a")
    return f"aa{index}b" if first is not None and first.burner else f"aa{index}a"


def judge_planted(ledger: Ledger, work: Path) -> dict[str, list[dict[str, Any]]]:
    """Separate: each planted run against the quiet run of the A/A pair of the same index;
    interleaved: each A/B run of the planted tree."""
    out: dict[str, list[dict[str, Any]]] = {"separate": [], "interleaved": []}
    for run in ledger.runs.values():
        if run.kind not in ("planted", "planted_ab"):
            continue
        path = work / "runs" / run.run_id
        design = "separate" if run.kind == "planted" else "interleaved"
        base = (
            ["--ab", path]
            if design == "interleaved"
            else [work / "runs" / quiet_base(ledger, run.run_id.removeprefix("pl")), path]
        )
        for metric in (WALL, CPU):
            hit, total, other = detection(compared(*base, "--metric", metric))
            out[design].append(
                {
                    "run": run.run_id,
                    "metric": metric,
                    "detected": hit,
                    "groups": total,
                    "others_flagged": other,
                    "load": f"{run.load_before} -> {run.load_after}",
                }
            )
            print(
                f"  planted {design} {run.run_id} {metric}: slower in {hit}/{total} planted "
                f"groups, {other} other groups flagged  (load {run.load_before} -> "
                f"{run.load_after})",
                flush=True,
            )
    return out


# ---- the browser suite -------------------------------------------------------------------------

# six pages of JS work (x the base iterations): with six groups of the unchanged engine, every
# group has the five others that the spread across groups needs (compare.cross_section)
LOOP_TASKS = {
    "loop_a": 1.0,
    "loop_b": 1.25,
    "loop_c": 1.5,
    "loop_d": 2.0,
    "loop_e": 2.5,
    "loop_f": 3.0,
}
# iterations of the base work. V8 runs 4M of them in ~10 ms, next to the ~240 ms of engine CPU a
# Chrome attempt spends anyway: a heavier page then moved Chrome's CPU by 1-2%, below any
# threshold (0 of 4 groups found, k=8). 100M makes the page's work a large share of the attempt.
LOOP_UNITS = 100_000_000
HEAVIER = 1.5  # the planted slowdown: each page's work x this
# The planted Chrome is another "build": a wrapper (its own binary, so its own identity in
# compare) that runs the same Chromium with this word in its user agent, and the pages do
# HEAVIER x their work when they see it. The corpus is the same in both runs, so Lightpanda's
# groups stay unchanged and are Chrome's controls, as an unchanged engine is in a real A/B.
HEAVY_MARK = "metewand-heavier"


def _loop_task(task_id: str, iterations: int) -> dict[str, Any]:
    """A raw-CDP task whose page does ``iterations`` of JS work (its weight), ``HEAVIER`` x that
    in an engine whose user agent carries ``HEAVY_MARK``."""
    heavy = int(iterations * HEAVIER)
    expression = (
        "(() => { let x = 0; "
        f"const n = /{HEAVY_MARK}/.test(navigator.userAgent) ? {heavy} : {iterations}; "
        "for (let i = 0; i < n; i++) x += i % 7; return 1; })()"
    )
    return {
        "artifact_profile": "l1_standard",
        "description": "A page doing a fixed amount of JS work.",
        "driver": {
            "kind": "raw_cdp",
            "steps": [
                {
                    "method": "Runtime.evaluate",
                    "params": {"expression": expression, "returnByValue": True},
                    "save_as": "value",
                }
            ],
        },
        "features": ["cdp.runtime.evaluate"],
        "grader": {
            "kind": "inline_assertions",
            "checks": [{"kind": "value_equals", "expected": 1}],
        },
        "layer": "L1",
        "scene": {"kind": "about_blank"},
        "subset_id": "t.raw",
        "tags": ["loop"],
        "task_id": task_id,
        "task_version": 1,
        "timeouts": {"hard_kill_ms": 60000, "task_ms": 30000},
    }


def loop_corpus(root: Path) -> Path:
    """Six tasks of JS work (``LOOP_TASKS``), heavier for an engine marked ``HEAVY_MARK``."""
    (root / "fixtures").mkdir(parents=True)
    (root / "fixtures" / "routes.json").write_text("{}")
    (root / "tasks").mkdir()
    manifest = {
        "bench_id": "loops",
        "bench_version": "0.0.1",
        "default_k_runs": 1,
        "layers": [
            {
                "layer_id": "L1",
                "subsets": [
                    {"subset_id": "t.raw", "driver": "raw_cdp", "task_glob": "tasks/*.json"}
                ],
            }
        ],
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    for task_id, weight in LOOP_TASKS.items():
        task = _loop_task(task_id, int(LOOP_UNITS * weight))
        (root / "tasks" / f"{task_id}.json").write_text(json.dumps(task))
    return root


def heavier_chrome(work: Path) -> Path:
    """The planted Chrome: a wrapper that runs this host's Chromium with ``HEAVY_MARK`` in its
    user agent."""
    from metewand.suites.browser.engines import resolve

    found = resolve("chrome")
    binary = getattr(found, "binary", None)
    if binary is None:
        raise SystemExit(f"no Chrome to plant a slowdown in: {found}")
    agent = (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
        f"HeadlessChrome Safari/537.36 {HEAVY_MARK}"
    )
    wrapper = work / "chrome-heavier"
    wrapper.write_text(f'#!/bin/sh\nexec {binary} "--user-agent={agent}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def browser_run(
    ledger: Ledger,
    work: Path,
    run: Run,
    engines: str,
    k: int,
    tasks: Path | None,
    chrome: Path | None = None,
) -> Run:
    if run.run_id in ledger.runs:
        return ledger.runs[run.run_id]
    run.load_before = load()
    started = time.monotonic()
    args = [
        "browser",
        "run",
        "--engines",
        engines,
        "--k",
        k,
        "--seed",
        "7",
        "--run-id",
        run.run_id,
        "--out",
        work / "runs",
        "--no-progress",
    ]
    if tasks is not None:
        args += ["--tasks", tasks]
    env = {"METEWAND_CHROME_BIN": str(chrome)} if chrome is not None else None
    done = metewand(*args, check=False, env=env)
    if done.returncode not in (0, 1):  # 1: some attempt ended infra/crash (counted, not judged)
        raise SystemExit(f"browser run {run.run_id}: exit {done.returncode}\n{done.stderr[-3000:]}")
    run.seconds, run.load_after = time.monotonic() - started, load()
    _gate(run, work / "runs" / run.run_id)
    print(
        f"  browser run {run.run_id:16} {run.seconds:6.0f} s  host gate "
        f"{'passed' if run.gate_passed else 'FAILED'} {','.join(run.conditions)}  "
        f"load {run.load_before} -> {run.load_after}",
        flush=True,
    )
    return ledger.add(run)


def _browser_counts(result: dict[str, Any], slowed: str | None) -> dict[str, Any]:
    found = {(g["task"], g["engine"]): g["verdict"] for g in result["groups"]}
    hit = [v for (_, e), v in found.items() if e == slowed]
    others = {k: v for k, v in found.items() if k[1] != slowed}
    return {
        "groups": len(found),
        "alarms": alarms(others),
        "detected": hit.count("slower"),
        "slowed_groups": len(hit),
        "not_comparable": list(found.values()).count("not comparable"),
    }


def browser_pair_ids(pair: int) -> dict[str, str]:
    """The four runs of browser pair ``pair``; pair 0 keeps the names of work dirs made before
    there were several, so their runs are reused."""
    tail = "" if pair == 0 else f"_{pair}"
    return {
        "a": f"br_a{tail}",
        "b": f"br_b{tail}",
        "base": f"br_loops6{tail}",
        "planted": f"br_planted6{tail}",
    }


def collect_browser(ledger: Ledger, work: Path, k: int, builtin: bool, pairs: int) -> None:
    """``pairs`` times: an A/A of two browser runs (the built-in suite, or the loop corpus with
    --quick), and the loop corpus run again with a Chrome whose pages are 50% heavier
    (Lightpanda unchanged, in the same run). Several pairs make the browser figures rates."""
    print(
        f"== browser: {pairs} A/A pair(s) of two runs (k={k}) and {pairs} with chrome slowed by "
        f"a {HEAVIER - 1:.0%} heavier page",
        flush=True,
    )
    loops = work / "loops6"
    if not loops.exists():
        loop_corpus(loops)
    corpus = None if builtin else loops
    heavy = heavier_chrome(work)
    for pair in range(pairs):
        ids = browser_pair_ids(pair)
        for side in ("a", "b"):
            browser_run(ledger, work, Run(ids[side], "browser"), "chrome,lightpanda", k, corpus)
        browser_run(ledger, work, Run(ids["base"], "browser"), "chrome,lightpanda", k, loops)
        run = Run(ids["planted"], "browser")
        browser_run(ledger, work, run, "chrome,lightpanda", k, loops, chrome=heavy)


def judge_browser(ledger: Ledger, work: Path) -> dict[str, Any] | None:
    """Each complete browser pair's counts, and their sums over the pairs."""
    pairs: list[dict[str, Any]] = []
    while set((ids := browser_pair_ids(len(pairs))).values()) <= ledger.runs.keys():
        pairs.append(_judge_browser_pair(ledger, work, ids))
    if not pairs:
        return None
    out: dict[str, Any] = {"pairs": pairs}
    for name in ("aa", "planted"):
        out[name] = {
            metric: {
                key: sum(p[name][metric][key] for p in pairs)
                for key in ("groups", "alarms", "detected", "slowed_groups", "not_comparable")
            }
            | {"pairs": len(pairs)}
            for metric in ("duration_ms", "engine_cpu_ns")
        }
    return out


def _judge_browser_pair(ledger: Ledger, work: Path, ids: dict[str, str]) -> dict[str, Any]:
    runs = {side: work / "runs" / run_id for side, run_id in ids.items()}
    out: dict[str, Any] = {"runs": ids, "aa": {}, "planted": {}}
    span = f"{ledger.runs[ids['a']].load_before} -> {ledger.runs[ids['b']].load_after}"
    planted_span = (
        f"{ledger.runs[ids['base']].load_before} -> {ledger.runs[ids['planted']].load_after}"
    )
    for metric in ("duration_ms", "engine_cpu_ns"):
        counts = _browser_counts(compared(runs["a"], runs["b"], "--metric", metric), None)
        out["aa"][metric] = {**counts, "load": span}
        print(
            f"  browser A/A {ids['a']}/{ids['b']} {metric}: {counts['alarms']} false alarms of "
            f"{counts['groups']} groups ({counts['not_comparable']} not comparable)  "
            f"(load {span})",
            flush=True,
        )
        result = compared(runs["base"], runs["planted"], "--metric", metric)
        counts = _browser_counts(result, "chrome")
        out["planted"][metric] = {**counts, "load": planted_span}
        print(
            f"  browser planted {ids['planted']} {metric}: chrome slower in "
            f"{counts['detected']}/{counts['slowed_groups']} groups, {counts['alarms']} "
            f"lightpanda groups flagged  (load {planted_span})",
            flush=True,
        )
    return out


def summary(aa: list, ab: list, planted: dict) -> list[str]:
    """The acceptance figures, one line each."""
    quiet = [p for p in aa if not p["burner"]]
    dirty = [p for p in aa if p["burner"]]
    groups = sum(p["groups"] for p in aa)
    counted = sum(p["wall_alarms"] for p in quiet) + sum(p["cpu_alarms"] for p in dirty)
    lines = [
        f"separate A/A: {len(aa)} pairs, gate exit 1 in "
        f"{sum(p['wall_exit'] == 1 or p['cpu_exit'] == 1 for p in aa)} pairs; wall gate exits "
        f"{[p['wall_exit'] for p in aa]}, CPU gate exits {[p['cpu_exit'] for p in aa]}",
        f"separate A/A: {counted} group false alarms of {groups} (quiet pairs on wall, burner "
        f"pairs on CPU); all pairs on wall {sum(p['wall_alarms'] for p in aa)}, on CPU "
        f"{sum(p['cpu_alarms'] for p in aa)}",
        f"separate A/A: host gate failed in {sum(g is False for p in aa for g in p['gates_passed'])}"
        f" of {2 * len(aa)} runs (runs with our burner: {len(dirty)})",
        f"interleaved A/A: {len(ab)} runs, false alarms wall {sum(r['wall_alarms'] for r in ab)}, "
        f"CPU {sum(r['cpu_alarms'] for r in ab)} of {sum(r['groups'] for r in ab)} groups; gate "
        f"exits wall {[r['wall_exit'] for r in ab]}, CPU {[r['cpu_exit'] for r in ab]}",
    ]
    for design in ("separate", "interleaved"):
        for metric in (WALL, CPU):
            rows = [r for r in planted[design] if r["metric"] == metric]
            hit, total = sum(r["detected"] for r in rows), sum(r["groups"] for r in rows)
            other = sum(r["others_flagged"] for r in rows)
            rate = f"{hit / total:.0%}" if total else "n/a"
            lines.append(
                f"planted {design} {metric}: detected {hit}/{total} ({rate}), other "
                f"groups flagged {other}"
            )
    return lines


def judge(work: Path) -> None:
    """Every figure from the runs in ``work/runs.json``, printed and kept in summary.json:
    separate-run comparisons twice, without the history (each pair on its own) and with it
    (a side of one run borrows each group's between-run spread from the runs before BASE)."""
    ledger = Ledger(work)
    document: dict[str, Any] = {"runs": [r.__dict__ for r in ledger.runs.values()]}
    print(f"== judging the runs of {work} (host load now {load()})", flush=True)
    ab = judge_ab(ledger, work)
    document["interleaved_aa"] = ab
    for mode, extra in (("without history", ["--no-history"]), ("with history", [])):
        HISTORY_ARGS[:] = extra
        print(f"== separate runs, {mode}", flush=True)
        aa, planted = judge_aa(ledger, work), judge_planted(ledger, work)
        browser = judge_browser(ledger, work)
        lines = summary(aa, ab, planted)
        for name in ("aa", "planted"):
            for metric, counts in (browser or {}).get(name, {}).items():
                lines.append(f"browser {name} {metric}: {counts}")
        print(f"== summary, {mode} (host load now {load()})")
        for line in lines:
            print(f"  {line}")
        document[mode.replace(" ", "_")] = {
            "separate_aa": aa,
            "planted": planted,
            "browser": browser,
            "summary": lines,
        }
    (work / "summary.json").write_text(json.dumps(document, indent=1, default=str))
    print(f"figures: {work / 'summary.json'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="1 pair of each kind: does it work?")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--polluted", type=int, default=5)
    parser.add_argument("--ab-runs", type=int, default=10)
    parser.add_argument("--planted-pairs", type=int, default=5)
    parser.add_argument("--planted-ab-runs", type=int, default=5)
    parser.add_argument("--browser-k", type=int, default=8, help="attempts per task x engine")
    parser.add_argument(
        "--browser-pairs",
        type=int,
        default=1,
        help="browser A/A pairs, and as many planted pairs (default 1; ~25 min a pair here)",
    )
    parser.add_argument("--no-browser", action="store_true", help="compute figures only")
    parser.add_argument("--out", type=Path, default=None, help="work dir (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the runs (default: removed)")
    parser.add_argument(
        "--reanalyze",
        type=Path,
        default=None,
        metavar="DIR",
        help="judge the runs of a kept work dir again; run nothing",
    )
    args = parser.parse_args()
    if args.reanalyze:
        judge(args.reanalyze)
        return
    if args.quick:
        args.pairs, args.polluted, args.ab_runs = 2, 1, 1
        args.planted_pairs, args.planted_ab_runs, args.browser_k = 1, 1, 5
        args.browser_pairs = 1
    work = args.out or Path(tempfile.mkdtemp(prefix="compare-false-alarms-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work dir {work}; host load {load()} (1/5/15 min); {os.cpu_count()} CPUs", flush=True)
    try:
        ledger = Ledger(work)  # a kept work dir's runs are reused, not run again
        collect_compute(ledger, work, args)
        if not args.no_browser:
            collect_browser(
                ledger, work, args.browser_k, builtin=not args.quick, pairs=args.browser_pairs
            )
        judge(work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
