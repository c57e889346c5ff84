"""False alarms and power of ``metewand compare`` on real runs of the sorting example (issue #22).

What it runs (the example as shipped: 15 groups of 8 repetitions), every figure printed with the
host's load average (1/5/15 min) before and after the runs it comes from:

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
   runs of the planted tree are compared with the A/A pairs' first runs; interleaved A/B runs of
   the planted tree against the unchanged one. Acceptance: detected in >= 90% of heapsort's
   groups interleaved, >= 80% separate, no other implementation flagged.

4. **The browser suite**: an A/A of two runs of the built-in suite (chrome and lightpanda, k=8;
   the loop corpus below with ``--quick``), and a planted slowdown: a corpus of four pages doing
   fixed JS work, chrome's pages 20% heavier in the NEW run (lightpanda's unchanged, from a run of
   its own: ``compare --base B --new N1 --new N2``). On duration_ms and engine_cpu_ns.

The host's own pollution gate is reported per run: on a shared machine a "quiet" pair may well
have been polluted by others, and the figures say so rather than hide it.

    .venv/bin/python benchmarks/compare_false_alarms.py            # the full acceptance run
    .venv/bin/python benchmarks/compare_false_alarms.py --quick    # 1 of each: does it work?
    .venv/bin/python benchmarks/compare_false_alarms.py --keep --out /tmp/cfa   # keep the runs
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
    path: Path
    burner: bool
    load_before: str
    load_after: str = ""
    seconds: float = 0.0
    gate_passed: bool | None = None
    conditions: list[str] = field(default_factory=list)


def metewand(*args: Any, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "metewand", *map(str, args)], capture_output=True, text=True
    )
    if check and done.returncode not in (0,):
        raise SystemExit(f"metewand {' '.join(map(str, args))}: exit {done.returncode}\n"
                         f"{done.stderr[-3000:]}")  # fmt: skip
    return done


def run_tree(tree: Path, run_id: str, work: Path, burner: bool = False,
             ab_baseline: Path | None = None) -> Run:  # fmt: skip
    """One run of ``tree``'s manifest (a niced CPU burner beside it when asked)."""
    record = Run(run_id, work / "runs" / run_id, burner, load())
    hog = None
    if burner:
        hog = subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"],
                               start_new_session=True)  # fmt: skip
    started = time.monotonic()
    try:
        args = ["run", tree / "metewand.toml", "--run-id", run_id, "--out", work / "runs",
                "--cache-dir", work / "cache", "--quiet"]  # fmt: skip
        if ab_baseline is not None:
            args += ["--ab-baseline", ab_baseline]
        metewand(*args)
    finally:
        if hog is not None:
            os.killpg(hog.pid, signal.SIGKILL)
            hog.wait()
    record.seconds = time.monotonic() - started
    record.load_after = load()
    summary = json.loads((record.path / "host_summary.json").read_text())
    gate = summary.get("gate") or {}
    record.gate_passed = gate.get("passed")
    record.conditions = [t["condition"] for t in gate.get("triggered") or []]
    print(f"  run {run_id:12} {record.seconds:6.0f} s  burner={'yes' if burner else 'no ':3}  "
          f"host gate {'passed' if record.gate_passed else 'FAILED'} "
          f"{','.join(record.conditions)}  load {record.load_before} -> {record.load_after}",
          flush=True)  # fmt: skip
    return record


def verdicts(result: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(g["case"], g["implementation"]): g["verdict"] for g in result["groups"]}


def compared(*args: Any) -> dict[str, Any]:
    return json.loads(metewand("compare", *args, "--json").stdout)


def gate_exit(*args: Any) -> int:
    return metewand("compare", *args, "--fail-on-regression", check=False).returncode


def alarms(found: dict[tuple[str, str], str]) -> int:
    return sum(v in ("slower", "faster") for v in found.values())


def separate_aa(tree: Path, work: Path, pairs: int, polluted: int) -> dict[str, Any]:
    print(f"== A/A of separate runs: {pairs} pairs, a burner beside one run of {polluted}",
          flush=True)  # fmt: skip
    out: list[dict[str, Any]] = []
    for i in range(pairs):
        burn = i < polluted
        a = run_tree(tree, f"aa{i}a", work, burner=burn and i % 2 == 0)
        b = run_tree(tree, f"aa{i}b", work, burner=burn and i % 2 == 1)
        wall, cpu = compared(a.path, b.path), compared(a.path, b.path, "--metric", CPU)
        entry = {
            "pair": i, "burner": burn, "runs": [a.__dict__, b.__dict__],
            "wall_exit": gate_exit(a.path, b.path),
            "cpu_exit": gate_exit(a.path, b.path, "--metric", CPU),
            "wall_alarms": alarms(verdicts(wall)), "cpu_alarms": alarms(verdicts(cpu)),
            "groups": len(wall["groups"]), "wall_counts": wall["counts"], "cpu_counts": cpu["counts"],
            "load": f"{a.load_before} -> {b.load_after}",
        }  # fmt: skip
        out.append(entry)
        print(f"  pair {i}: burner={burn}  wall gate exit {entry['wall_exit']}, CPU gate exit "
              f"{entry['cpu_exit']}; false alarms wall {entry['wall_alarms']}, CPU "
              f"{entry['cpu_alarms']} of {entry['groups']} groups  (load {entry['load']})",
              flush=True)  # fmt: skip
    return {"pairs": out}


def interleaved_aa(tree: Path, twin: Path, work: Path, runs: int) -> dict[str, Any]:
    print(f"== A/A interleaved: {runs} runs, --ab-baseline an identical copy", flush=True)
    out = []
    for i in range(runs):
        r = run_tree(tree, f"ab{i}", work, ab_baseline=twin)
        wall, cpu = compared("--ab", r.path), compared("--ab", r.path, "--metric", CPU)
        entry = {
            "run": r.__dict__, "wall_alarms": alarms(verdicts(wall)),
            "cpu_alarms": alarms(verdicts(cpu)), "groups": len(wall["groups"]),
            "wall_exit": gate_exit("--ab", r.path),
            "cpu_exit": gate_exit("--ab", r.path, "--metric", CPU),
            "not_comparable": wall["counts"].get("not comparable", 0),
        }  # fmt: skip
        out.append(entry)
        print(f"  run {i}: false alarms wall {entry['wall_alarms']}, CPU {entry['cpu_alarms']} "
              f"of {entry['groups']}; gate exits wall {entry['wall_exit']}, CPU "
              f"{entry['cpu_exit']}  (load {r.load_before} -> {r.load_after})", flush=True)  # fmt: skip
    return {"runs": out}


def detection(result: dict[str, Any]) -> tuple[int, int, int]:
    """(planted groups called slower, planted groups, other groups flagged)."""
    found = verdicts(result)
    planted = [v for (_, impl), v in found.items() if impl == PLANTED_IMPLEMENTATION]
    others = [v for (_, impl), v in found.items() if impl != PLANTED_IMPLEMENTATION]
    return planted.count("slower"), len(planted), alarms(dict(enumerate(others)))  # type: ignore[arg-type]


def planted_runs(
    tree: Path, planted: Path, work: Path, bases: list[Path], ab_runs: int
) -> dict[str, Any]:
    print(f"== planted: {PLANTED_IMPLEMENTATION} +{PLANTED_FRACTION:.0%} of its execute CPU",
          flush=True)  # fmt: skip
    separate = []
    for i, base in enumerate(bases):
        r = run_tree(planted, f"pl{i}", work)
        for metric in (WALL, CPU):
            hit, total, other = detection(compared(base, r.path, "--metric", metric))
            separate.append({"pair": i, "metric": metric, "detected": hit, "groups": total,
                             "others_flagged": other, "load": f"{r.load_before} -> {r.load_after}"})  # fmt: skip
            print(f"  separate {i} {metric}: slower in {hit}/{total} planted groups, "
                  f"{other} other groups flagged  (load {r.load_before} -> {r.load_after})",
                  flush=True)  # fmt: skip
    interleaved = []
    for i in range(ab_runs):
        r = run_tree(planted, f"plab{i}", work, ab_baseline=tree)
        for metric in (WALL, CPU):
            hit, total, other = detection(compared("--ab", r.path, "--metric", metric))
            interleaved.append({"run": i, "metric": metric, "detected": hit, "groups": total,
                                "others_flagged": other, "load": f"{r.load_before} -> {r.load_after}"})  # fmt: skip
            print(f"  interleaved {i} {metric}: slower in {hit}/{total} planted groups, "
                  f"{other} other groups flagged  (load {r.load_before} -> {r.load_after})",
                  flush=True)  # fmt: skip
    return {"separate": separate, "interleaved": interleaved}


# ---- the browser suite -------------------------------------------------------------------------

LOOP_TASKS = {"loop_a": 1.0, "loop_b": 1.5, "loop_c": 2.0, "loop_d": 3.0}  # work, x the base
LOOP_UNITS = 4_000_000  # iterations of the base work: a few hundred ms of JS in either engine


def _loop_task(task_id: str, iterations: int) -> dict[str, Any]:
    """A raw-CDP task whose page does ``iterations`` of JS work (its weight)."""
    expression = (
        f"(() => {{ let x = 0; for (let i = 0; i < {iterations}; i++) x += i % 7; return 1; }})()"
    )
    return {
        "artifact_profile": "l1_standard", "description": "A page doing a fixed amount of JS work.",
        "driver": {"kind": "raw_cdp", "steps": [{"method": "Runtime.evaluate", "params": {
            "expression": expression, "returnByValue": True}, "save_as": "value"}]},
        "features": ["cdp.runtime.evaluate"],
        "grader": {"kind": "inline_assertions", "checks": [{"kind": "value_equals", "expected": 1}]},
        "layer": "L1", "scene": {"kind": "about_blank"}, "subset_id": "t.raw", "tags": ["loop"],
        "task_id": task_id, "task_version": 1, "timeouts": {"hard_kill_ms": 60000, "task_ms": 30000},
    }  # fmt: skip


def loop_corpus(root: Path, heavier: float) -> Path:
    """Four tasks of JS work; ``heavier`` multiplies every page's work (1.2: +20%)."""
    (root / "fixtures").mkdir(parents=True)
    (root / "fixtures" / "routes.json").write_text("{}")
    (root / "tasks").mkdir()
    manifest = {"bench_id": "loops", "bench_version": "0.0.1", "default_k_runs": 1,
                "layers": [{"layer_id": "L1", "subsets": [{"subset_id": "t.raw",
                            "driver": "raw_cdp", "task_glob": "tasks/*.json"}]}]}  # fmt: skip
    (root / "manifest.json").write_text(json.dumps(manifest))
    for task_id, weight in LOOP_TASKS.items():
        iterations = int(LOOP_UNITS * weight * heavier)
        (root / "tasks" / f"{task_id}.json").write_text(json.dumps(_loop_task(task_id, iterations)))
    return root


def browser_run(work: Path, run_id: str, engines: str, k: int, tasks: Path | None) -> Run:
    record = Run(run_id, work / "runs" / run_id, False, load())
    started = time.monotonic()
    args = ["browser", "run", "--engines", engines, "--k", k, "--seed", "7", "--run-id", run_id,
            "--out", work / "runs", "--no-progress"]  # fmt: skip
    if tasks is not None:
        args += ["--tasks", tasks]
    done = metewand(*args, check=False)
    if done.returncode not in (0, 1):  # 1: some attempt ended infra/crash (counted, not judged)
        raise SystemExit(f"browser run {run_id}: exit {done.returncode}\n{done.stderr[-3000:]}")
    record.seconds, record.load_after = time.monotonic() - started, load()
    gate = (json.loads((record.path / "host_summary.json").read_text()).get("gate")) or {}
    record.gate_passed = gate.get("passed")
    record.conditions = [t["condition"] for t in gate.get("triggered") or []]
    print(f"  browser run {run_id:10} {record.seconds:6.0f} s  host gate "
          f"{'passed' if record.gate_passed else 'FAILED'} {','.join(record.conditions)}  "
          f"load {record.load_before} -> {record.load_after}", flush=True)  # fmt: skip
    return record


def _browser_counts(result: dict[str, Any], slowed: str | None) -> dict[str, Any]:
    found = {(g["task"], g["engine"]): g["verdict"] for g in result["groups"]}
    hit = [v for (_, e), v in found.items() if e == slowed]
    others = {k: v for k, v in found.items() if k[1] != slowed}
    return {"groups": len(found), "alarms": alarms(others), "detected": hit.count("slower"),
            "slowed_groups": len(hit), "not_comparable": list(found.values()).count("not comparable")}  # fmt: skip


def browser_figures(work: Path, k: int, builtin: bool) -> dict[str, Any]:
    """A/A of two browser runs (the built-in suite, or the loop corpus with --quick), and the
    loop corpus with chrome's pages 20% heavier."""
    print(f"== browser: A/A of two runs (k={k}) and chrome slowed by a 20% heavier page",
          flush=True)  # fmt: skip
    loops, heavy = loop_corpus(work / "loops", 1.0), loop_corpus(work / "loops-heavy", 1.2)
    corpus = None if builtin else loops
    a = browser_run(work, "br_a", "chrome,lightpanda", k, corpus)
    b = browser_run(work, "br_b", "chrome,lightpanda", k, corpus)
    out: dict[str, Any] = {"aa_corpus": "built-in" if builtin else "loops", "aa": {}}
    for metric in ("duration_ms", "engine_cpu_ns"):
        counts = _browser_counts(compared(a.path, b.path, "--metric", metric), None)
        out["aa"][metric] = {**counts, "load": f"{a.load_before} -> {b.load_after}"}
        print(f"  A/A {metric}: {counts['alarms']} false alarms of {counts['groups']} groups "
              f"({counts['not_comparable']} not comparable)  (load {a.load_before} -> "
              f"{b.load_after})", flush=True)  # fmt: skip
    base = browser_run(work, "br_base", "chrome,lightpanda", k, loops)
    slow = browser_run(work, "br_chrome_heavy", "chrome", k, heavy)
    rest = browser_run(work, "br_lp_same", "lightpanda", k, loops)
    out["planted"] = {}
    for metric in ("duration_ms", "engine_cpu_ns"):
        result = compared("--base", base.path, "--new", slow.path, "--new", rest.path,
                          "--metric", metric)  # fmt: skip
        counts = _browser_counts(result, "chrome")
        out["planted"][metric] = {**counts, "load": f"{base.load_before} -> {rest.load_after}"}
        print(f"  planted {metric}: chrome slower in {counts['detected']}/"
              f"{counts['slowed_groups']} groups, {counts['alarms']} lightpanda groups flagged  "
              f"(load {base.load_before} -> {rest.load_after})", flush=True)  # fmt: skip
    return out


def summary(aa: dict, ab: dict, planted: dict) -> list[str]:
    """The acceptance figures, one line each."""
    pairs = aa["pairs"]
    quiet = [p for p in pairs if not p["burner"]]
    dirty = [p for p in pairs if p["burner"]]
    groups = sum(p["groups"] for p in pairs)
    counted = sum(p["wall_alarms"] for p in quiet) + sum(p["cpu_alarms"] for p in dirty)
    lines = [
        f"separate A/A: {len(pairs)} pairs, gate exit 1 in "
        f"{sum(p['wall_exit'] == 1 or p['cpu_exit'] == 1 for p in pairs)} pairs; wall gate exits "
        f"{[p['wall_exit'] for p in pairs]}, CPU gate exits {[p['cpu_exit'] for p in pairs]}",
        f"separate A/A: {counted} group false alarms of {groups} (quiet pairs on wall, burner "
        f"pairs on CPU); all pairs on wall {sum(p['wall_alarms'] for p in pairs)}, on CPU "
        f"{sum(p['cpu_alarms'] for p in pairs)}",
        f"separate A/A: host gate failed in {sum(not r['gate_passed'] for p in pairs for r in p['runs'])}"
        f" of {2 * len(pairs)} runs (burner runs: {sum(p['burner'] for p in pairs)})",
        f"interleaved A/A: {len(ab['runs'])} runs, false alarms wall "
        f"{sum(r['wall_alarms'] for r in ab['runs'])}, CPU {sum(r['cpu_alarms'] for r in ab['runs'])}"
        f" of {sum(r['groups'] for r in ab['runs'])} groups; gate exits wall "
        f"{[r['wall_exit'] for r in ab['runs']]}, CPU {[r['cpu_exit'] for r in ab['runs']]}",
    ]
    for design in ("separate", "interleaved"):
        for metric in (WALL, CPU):
            rows = [r for r in planted[design] if r["metric"] == metric]
            hit, total = sum(r["detected"] for r in rows), sum(r["groups"] for r in rows)
            other = sum(r["others_flagged"] for r in rows)
            rate = f"{hit / total:.0%}" if total else "n/a"
            lines.append(f"planted {design} {metric}: detected {hit}/{total} ({rate}), other "
                         f"groups flagged {other}")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="1 pair of each kind: does it work?")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--polluted", type=int, default=5)
    parser.add_argument("--ab-runs", type=int, default=10)
    parser.add_argument("--planted-pairs", type=int, default=5)
    parser.add_argument("--planted-ab-runs", type=int, default=5)
    parser.add_argument("--browser-k", type=int, default=8, help="attempts per task x engine")
    parser.add_argument("--no-browser", action="store_true", help="compute figures only")
    parser.add_argument("--out", type=Path, default=None, help="work dir (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the runs (default: removed)")
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.polluted, args.ab_runs = 2, 1, 1
        args.planted_pairs, args.planted_ab_runs, args.browser_k = 1, 1, 5
    work = args.out or Path(tempfile.mkdtemp(prefix="compare-false-alarms-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work dir {work}; host load {load()} (1/5/15 min); {os.cpu_count()} CPUs", flush=True)
    try:
        tree = work / "tree"
        shutil.copytree(EXAMPLE, tree, ignore=shutil.ignore_patterns("runs"))
        twin = work / "twin"
        shutil.copytree(EXAMPLE, twin, ignore=shutil.ignore_patterns("runs"))
        planted = plant_slowdown(
            EXAMPLE, PLANTED_IMPLEMENTATION, PLANTED_FRACTION, work / "planted"
        )
        aa = separate_aa(tree, work, args.pairs, args.polluted)
        ab = interleaved_aa(tree, twin, work, args.ab_runs)
        quiet_bases = [work / "runs" / f"aa{i}a" for i in range(args.pairs)][: args.planted_pairs]
        found = planted_runs(tree, planted, work, quiet_bases, args.planted_ab_runs)
        lines = summary(aa, ab, found)
        browser = None
        if not args.no_browser:
            browser = browser_figures(work, args.browser_k, builtin=not args.quick)
            for name, block in (("A/A", browser["aa"]), ("planted", browser["planted"])):
                for metric, counts in block.items():
                    lines.append(f"browser {name} {metric}: {counts}")
        print(f"== summary (host load now {load()})")
        for line in lines:
            print(f"  {line}")
        (work / "summary.json").write_text(json.dumps(
            {"separate_aa": aa, "interleaved_aa": ab, "planted": found, "browser": browser,
             "summary": lines},
            indent=1, default=str))  # fmt: skip
        print(f"figures: {work / 'summary.json'}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
