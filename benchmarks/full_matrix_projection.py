"""Issue 26, part 3: how long would the peer's whole matrix take, profiled, on N hosts?

The peer's published matrix is 1,928 tasks in 18 subsets x 4 engines x k = 3 = 23,136 rows
(``PEER_SUBSETS``, from ../shared/reference/lexbench-facts.md). This script measures on this
machine, with real runs of the peer corpus (``../shared/corpus/lexbench``), and prints every
input with the load average it ran under:

1. the cost of one attempt per subset x engine (Chrome, Lightpanda): a seeded random sample of
   each runnable subset (``--tasks-per-subset`` tasks x ``--k``), run once unprofiled and once
   profiled with interleaved calibration (each attempt plus its unprofiled twin), on the local
   executor. An attempt's cost is its *slot time*: from its start to the next attempt's start on
   the same slot (settle wait, page cleanup and the gap included). The first attempt of each
   engine and driver path in a run is left out (it pays the engine's launch or the adapter's
   start, which the whole matrix pays once per host). A cell's cost is the *mean* slot time: the
   matrix's wall is a sum, and a subset's few tasks that wait out a timeout (Lightpanda on
   frames: 8 s against ~0.1 s) are part of it. The sample was once two tasks evenly spaced by
   id, and one of Lightpanda's two chrome-remote-interface tasks was a frame task: the cell's
   median said 8.2 s where the whole subset's mean is ~1.2 s;
2. the Dask overhead per round: the same raw-CDP selection on the local executor and on
   ``--dask-local 1``; per-round cost = median over rounds of (next round's start - this
   round's start), the difference being what Dask adds;
3. the scaling efficiency at N = 1 and 2 hosts: the same profiled selection on one namespace
   host pinned to CPU 0, then on two pinned to CPU 0 and CPU 1 (``tests/netns_hosts.py``; needs
   root): e2 = T1 / (2 T2) over the warm rows' span.

The projection for N = 1, 2, 4, 8, 16 hosts of this size (2 cores):

    wall(N) = per-host fixed (cold starts) + (sum of attempt costs + rounds x Dask overhead)
              / (N x e(N)) + one unit's wall (the tail)

with e(1) = 1 and e(N) = min(1, e2) ** log2(N) (each doubling keeps losing what the first did:
a pessimistic reading of one measured point). e2 is read from rounds paired across the two runs
(the same round's seconds alone and beside a second host); the whole span's ratio, also printed,
holds the tail of a dozen unequal rounds split over two hosts (0.851 here where the paired
rounds said 1.017), which the formula adds once on its own. The projection's 95% interval resamples the sampled
tasks of every cell (a bootstrap over tasks, their k attempts kept together), so a small
sample says how little it knows. Assumptions, printed with the figures: Moli and
Obscura cannot be obtained here, so each is costed as Chrome (the dearer measured engine); the
four driver paths with no adapter here (chromedp, rod, chromiumoxide, ferrum) are costed as the
median of the measured driver-path subsets of the same engine.

    .venv/bin/python benchmarks/full_matrix_projection.py [--tasks-per-subset 8] [--k 1]
        [--seed projection] [--skip-scaling] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LEXBENCH = REPO.parent / "shared" / "corpus" / "lexbench"
sys.path.insert(0, str(REPO / "tests"))

# The peer's published matrix (../shared/reference/lexbench-facts.md, section 2.1).
PEER_SUBSETS = {
    "l1.raw_cdp": 375,
    "l1.agent_browser_tool": 78,
    "l1.playwright": 142,
    "l1.puppeteer": 143,
    "l1.chrome_remote_interface": 92,
    "l1.cdp_use": 92,
    "l1.pydoll": 92,
    "l1.stagehand": 92,
    "l1.chrome_devtools_mcp": 90,
    "l1.chromedp": 92,
    "l1.rod": 92,
    "l1.chromiumoxide": 92,
    "l1.ferrum": 92,
    "l1.agent_browser_scenarios": 89,
    "l1.selenium": 87,
    "l2.web_platform": 182,
    "l2.playwright": 3,
    "l2.puppeteer": 3,
}
PEER_ENGINES = ("chrome", "lightpanda", "moli", "obscura")
MEASURED_ENGINES = ("chrome", "lightpanda")
NOT_HERE = ("l1.chromedp", "l1.rod", "l1.chromiumoxide", "l1.ferrum")  # no adapter here
PEER_K = 3
COLD_START_SAMPLES = 5  # the default, per engine per host
HOSTS = (1, 2, 4, 8, 16)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f} {five:.1f} {fifteen:.1f}"


def say(text: str) -> None:
    print(text, flush=True)


REUSE = {"on": False}  # --reuse: a complete run already in --out is read, not run again


def _reused_wall(args: Sequence[str]) -> float | None:
    """The wall of the run ``args`` names when ``--reuse`` and it is complete in ``--out``."""
    if not REUSE["on"]:
        return None
    run_dir = Path(args[args.index("--out") + 1]) / args[args.index("--run-id") + 1]
    try:
        manifest = json.loads((run_dir / "run_manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("state") != "complete":
        return None
    say(f"reusing {run_dir} (complete; its wall from its manifest; the loads printed are now's)")
    return _t(manifest["completed_at"]) - _t(manifest["started_at"])


def metewand(*args: str, timeout: float = 3600) -> float:
    """Run ``metewand browser run ...``; its wall in seconds (it must succeed)."""
    reused = _reused_wall(args)
    if reused is not None:
        return reused
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "browser", "run", *args, "--no-progress"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=_env(),
    )
    if done.returncode not in (0, 1):  # 1: some attempt crashed; its rows are still costs
        raise RuntimeError(f"metewand browser run {' '.join(args)}: {done.stderr[-3000:]}")
    return time.perf_counter() - started


def _env() -> dict[str, str]:
    import dask_helpers

    return dask_helpers.dask_env()


def rows_of(run_dir: Path) -> list[dict[str, Any]]:
    text = (run_dir / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def slot_times(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """key -> seconds from the row's start to the next start on its slot (the last: its end);
    the first row of each engine x driver path on a slot is left out (launch, adapter start)."""
    by_slot: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        where = row.get("placement") or {}
        by_slot[str(where.get("worker") or row.get("run_context", {}).get("worker_slot"))].append(
            row
        )
    out: dict[str, float] = {}
    for slot_rows in by_slot.values():
        slot_rows.sort(key=lambda r: _t(r["started_at"]))
        seen: set[tuple[str, str]] = set()
        for i, row in enumerate(slot_rows):
            path = (row["engine"], str(row.get("driver_path") or row["subset"]))
            end = _t(slot_rows[i + 1]["started_at"]) if i + 1 < len(slot_rows) else None
            if path not in seen:
                seen.add(path)
                continue
            out[row["key"]] = (end if end is not None else _t(row["finished_at"])) - _t(
                row["started_at"]
            )
    return out


def sample_tasks(per_subset: int, seed: str) -> dict[str, list[str]]:
    """``per_subset`` task ids of every subset runnable here, drawn at random (seeded per subset,
    so a larger sample of the same seed differs by its draws only)."""
    from metewand.suites.browser.tasks import load_corpus

    corpus = load_corpus(LEXBENCH)
    by_subset: dict[str, list[str]] = defaultdict(list)
    for task in sorted(corpus.tasks, key=lambda t: t.task_id):
        if task.subset_id in PEER_SUBSETS and task.subset_id not in NOT_HERE:
            by_subset[task.subset_id].append(task.task_id)
    return {
        subset: sorted(drawn(ids, per_subset, f"{seed}:{subset}"))
        for subset, ids in sorted(by_subset.items())
    }


def drawn(ids: Sequence[str], count: int, seed: str) -> list[str]:
    if len(ids) <= count:
        return list(ids)
    return random.Random(seed).sample(list(ids), count)


PROFILED_FLAGS = (
    "--resource-profile",
    "engine",
    "--resource-calibration",
    "interleaved",
    "--cold-start-samples",
    "3",
)


ByTask = dict[str, list[float]]  # task id -> its attempts' seconds


def per_attempt(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, ByTask]]:
    """subset/engine -> {"alone": {task: [s]}, "pair": {task: [s]}}: each planned attempt's own
    slot time, and with its unprofiled twin's (a profiled run; both halves must have one)."""
    times = slot_times(rows)
    out: dict[str, dict[str, ByTask]] = defaultdict(lambda: {"alone": {}, "pair": {}})
    for row in rows:
        if row.get("calibration_twin") or row["key"] not in times:
            continue
        cell = out[f"{row['subset']}/{row['engine']}"]
        cell["alone"].setdefault(row["task_id"], []).append(times[row["key"]])
        twin = times.get(f"{row['key']}-observer-off")
        if twin is not None:
            cell["pair"].setdefault(row["task_id"], []).append(times[row["key"]] + twin)
    return dict(sorted(out.items()))


def _flat(by_task: ByTask) -> list[float]:
    return [s for seconds in by_task.values() for s in seconds]


def _figures(wall: float, rows: int, before: str, found: dict[str, Any], kind: str) -> dict:
    cells = {key: v[kind] for key, v in found.items() if v[kind]}
    return {
        "wall_s": wall,
        "rows": rows,
        "load_before": before,
        "load_after": load(),
        "mean_s": {key: sum(_flat(v)) / len(_flat(v)) for key, v in cells.items()},
        "median_s": {key: median(_flat(v)) for key, v in cells.items()},
        "by_task": cells,
        "samples": {key: len(_flat(v[kind])) for key, v in found.items()},
    }


def _run_args(out: Path, selection: Sequence[str], k: int) -> list[str]:
    """The arguments every measuring run of this script shares (its own run id aside)."""
    return [
        "--tasks",
        str(LEXBENCH),
        "--engines",
        ",".join(MEASURED_ENGINES),
        "--k",
        str(k),
        "--out",
        str(out),
        "--seed",
        "projection",
        *selection,
    ]


def attempt_costs(out: Path, sample: dict[str, list[str]], k: int) -> dict[str, Any]:
    """Mean slot time per subset x engine: unprofiled (``off``), profiled with its twin
    (``profiled``: interleaved calibration) and profiled alone (``profiled_alone``: what a run
    calibrated against a separate baseline pays per attempt, the baseline being an ``off``)."""
    selection = [a for ids in sample.values() for t in ids for a in ("--task", t)]
    common = _run_args(out, selection, k)
    figures: dict[str, Any] = {"tasks": sum(map(len, sample.values())), "k": k}
    before = load()
    wall = metewand(*common, "--run-id", "cost-off")
    rows = rows_of(out / "cost-off")
    figures["off"] = _figures(wall, len(rows), before, per_attempt(rows), "alone")
    before = load()
    wall = metewand(*common, "--run-id", "cost-profiled", *PROFILED_FLAGS)
    rows = rows_of(out / "cost-profiled")
    found = per_attempt(rows)
    figures["profiled"] = _figures(wall, len(rows), before, found, "pair")
    figures["profiled_alone"] = _figures(wall, len(rows), before, found, "alone")
    cold = [
        json.loads(x) for x in (out / "cost-profiled" / "cold_start.jsonl").read_text().splitlines()
    ]
    figures["cold_start_ready_ms"] = {
        e: median([c["ready_ms"] for c in cold if c["engine"] == e and c.get("ready_ms")])
        for e in MEASURED_ENGINES
    }
    return figures


def round_costs(rows: Sequence[dict[str, Any]]) -> float:
    """Median over rounds of (next round's first start - this round's first start), seconds."""
    starts: dict[int, float] = {}
    for row in rows:
        index = int(row["order"]["round"])
        starts[index] = min(starts.get(index, math.inf), _t(row["started_at"]))
    ordered = [starts[i] for i in sorted(starts)]
    return median(b - a for a, b in zip(ordered, ordered[1:], strict=False))


def dask_overhead(out: Path, tasks: Sequence[str], k: int) -> dict[str, Any]:
    selection = [a for t in tasks for a in ("--task", t)]
    common = _run_args(out, selection, k)
    found: dict[str, Any] = {}
    for name, extra in (("local", []), ("dask", ["--executor", "dask", "--dask-local", "1"])):
        before = load()
        metewand(*common, "--run-id", f"overhead-{name}", *extra)
        found[name] = {
            "round_s": round_costs(rows_of(out / f"overhead-{name}")),
            "load_before": before,
            "load_after": load(),
        }
    found["overhead_s"] = found["dask"]["round_s"] - found["local"]["round_s"]
    found["rounds"] = len(tasks) * k
    return found


def warm_span(rows: Sequence[dict[str, Any]]) -> float:
    return max(_t(r["finished_at"]) for r in rows) - min(_t(r["started_at"]) for r in rows)


def round_seconds(rows: Sequence[dict[str, Any]]) -> dict[int, float]:
    """round -> seconds from its first start to the next round's first start on the same host
    (a host's last round: to its last end)."""
    spans: dict[str, dict[int, list[float]]] = defaultdict(dict)
    for row in rows:
        where = row.get("placement") or {}
        span = spans[str(where.get("place") or where.get("host"))].setdefault(
            int(row["order"]["round"]), [math.inf, 0.0]
        )
        span[0] = min(span[0], _t(row["started_at"]))
        span[1] = max(span[1], _t(row["finished_at"]))
    out = {}
    for rounds in spans.values():
        ordered = sorted(rounds.items(), key=lambda item: item[1][0])
        for i, (index, (start, end)) in enumerate(ordered):
            out[index] = (ordered[i + 1][1][0] if i + 1 < len(ordered) else end) - start
    return out


def scaling(out: Path, tasks: Sequence[str], k: int) -> dict[str, Any]:
    """Warm span of the same profiled selection on 1 and on 2 namespace hosts (a CPU each)."""
    import netns_hosts

    why = netns_hosts.cannot_make_hosts()
    if why is not None:
        return {"unavailable": why}
    import dask_helpers

    selection = [a for t in tasks for a in ("--task", t)]
    found: dict[str, Any] = {}
    for hosts in (1, 2):
        lab = netns_hosts.NetnsLab()
        try:
            lab.start_scheduler()
            for i in range(hosts):
                lab.start_worker(lab.add_host(f"host-{i}", i))
            dask_helpers.wait_for_workers_at(lab.address, hosts, timeout_s=120)
            before = load()
            metewand(
                "--tasks",
                str(LEXBENCH),
                "--engines",
                ",".join(MEASURED_ENGINES),
                "--k",
                str(k),
                "--out",
                str(out),
                "--seed",
                "projection",
                *selection,
                "--resource-profile",
                "engine",
                "--resource-calibration",
                "interleaved",
                "--cold-start-samples",
                "1",
                "--run-id",
                f"scale-{hosts}",
                "--executor",
                "dask",
                "--scheduler",
                lab.address,
            )
        finally:
            lab.close()
        rows = rows_of(out / f"scale-{hosts}")
        found[f"n{hosts}"] = {
            "span_s": warm_span(rows),
            "rows": len(rows),
            "load_before": before,
            "load_after": load(),
        }
    # Two readings of the efficiency at N = 2. The span's holds the tail (a dozen rounds of
    # unequal length split over two hosts: one host idles while the other finishes), which the
    # projection adds once on its own and which a matrix of thousands of rounds does not have.
    # The paired rounds' says what sharing the machine costs each round: the same round's
    # seconds on one host and with a second beside it, the median ratio. The projection uses it.
    found["e2_span"] = found["n1"]["span_s"] / (2 * found["n2"]["span_s"])
    one, two = (round_seconds(rows_of(out / f"scale-{n}")) for n in (1, 2))
    ratios = sorted(two[r] / one[r] for r in one.keys() & two.keys() if one[r] > 0)
    found["paired_rounds"] = len(ratios)
    found["e2"] = 1 / median(ratios)
    return found


def cost_table(costs: dict[str, Any], mode: str) -> dict[tuple[str, str], float]:
    """Seconds per planned attempt for every peer subset x engine (assumptions filled in)."""
    measured = costs[mode]["mean_s"]
    out: dict[tuple[str, str], float] = {}
    driver_paths = [
        s
        for s in PEER_SUBSETS
        if s.startswith("l1.") and s not in ("l1.raw_cdp", "l1.agent_browser_tool", *NOT_HERE)
    ]
    for engine in MEASURED_ENGINES:
        known = [measured[f"{s}/{engine}"] for s in driver_paths if f"{s}/{engine}" in measured]
        fallback = median(known) if known else 0.0
        for subset in PEER_SUBSETS:
            out[(subset, engine)] = measured.get(f"{subset}/{engine}", fallback)
    for engine in PEER_ENGINES[2:]:  # Moli, Obscura: costed as Chrome
        for subset in PEER_SUBSETS:
            out[(subset, engine)] = out[(subset, "chrome")]
    return out


SAMPLED_EVERY = 4  # --resource-calibration-every of the "sampled" mode
MODES = (
    ("off", "off"),
    ("profiled", "profiled, interleaved calibration"),
    ("sampled", f"profiled, twins on 1 round in {SAMPLED_EVERY}"),
    ("separate", "profiled + a separate off baseline"),
)


def work_table(costs: dict[str, Any], mode: str) -> dict[tuple[str, str], float]:
    """Seconds per planned attempt of ``mode`` (``separate``: profiled alone + off;
    ``sampled``: profiled alone + the twin's share, one in ``SAMPLED_EVERY``)."""
    if mode == "sampled":
        alone, pair = cost_table(costs, "profiled_alone"), cost_table(costs, "profiled")
        return {key: alone[key] + (pair[key] - alone[key]) / SAMPLED_EVERY for key in alone}
    if mode != "separate":
        return cost_table(costs, mode)
    alone, off = cost_table(costs, "profiled_alone"), cost_table(costs, "off")
    return {key: alone[key] + off[key] for key in alone}


def project(
    costs: dict[str, Any], overhead_s: float, e2: float | None, engines: Sequence[str]
) -> dict[str, dict[int, float]]:
    """Projected wall (hours) per mode and host count for ``engines`` x the peer's subsets."""
    out: dict[str, dict[int, float]] = {}
    ready = costs["cold_start_ready_ms"]
    # cold starts are costed at their ready time (their teardown is not measured)
    cold_s = COLD_START_SAMPLES * sum(ready.get(e, ready["chrome"]) for e in engines) / 1000
    rounds = sum(PEER_SUBSETS.values()) * PEER_K
    for mode, _ in MODES:
        table = work_table(costs, mode)
        work = sum(n * PEER_K * table[(s, e)] for s, n in PEER_SUBSETS.items() for e in engines)
        work += rounds * max(0.0, overhead_s) * (2 if mode == "separate" else 1)
        tail = max(len(engines) * sum(table[(s, e)] for e in engines) for s in PEER_SUBSETS)
        fixed = 0.0 if mode == "off" else cold_s
        out[mode] = {}
        for n in HOSTS:
            # capped at 1: a second host beside the first never makes a round faster (a
            # paired reading above 1 is the noise of a dozen rounds)
            eff = 1.0 if n == 1 or e2 is None else min(1.0, e2) ** math.log2(n)
            out[mode][n] = (fixed + work / (n * eff) + tail) / 3600
    return out


COST_MODES = ("off", "profiled", "profiled_alone")


def resampled(costs: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``costs`` with every cell's mean taken again over its sampled tasks drawn with replacement
    (one draw of tasks for all three modes: the same tasks ran in each)."""
    out = {**costs, **{mode: {**costs[mode], "mean_s": {}} for mode in COST_MODES}}
    cells = {cell for mode in COST_MODES for cell in costs[mode]["by_task"]}
    for cell in sorted(cells):
        tasks = sorted({t for mode in COST_MODES for t in costs[mode]["by_task"].get(cell, {})})
        draw = [rng.choice(tasks) for _ in tasks]
        for mode in COST_MODES:
            by_task = costs[mode]["by_task"].get(cell)
            if not by_task:
                continue
            values = [s for task in draw for s in by_task.get(task, [])]
            mean = sum(values) / len(values) if values else costs[mode]["mean_s"][cell]
            out[mode]["mean_s"][cell] = mean
    return out


def intervals(
    costs: dict[str, Any],
    overhead_s: float,
    e2: float | None,
    engines: Sequence[str],
    hosts: int = 8,
    draws: int = 2000,
) -> dict[str, tuple[float, float]]:
    """95% bootstrap interval (hours) of each mode's projection on ``hosts`` hosts."""
    rng = random.Random("projection-bootstrap")
    found: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
    for _ in range(draws):
        projected = project(resampled(costs, rng), overhead_s, e2, engines)
        for mode in found:
            found[mode].append(projected[mode][hosts])
    out = {}
    for mode, values in found.items():
        values.sort()
        out[mode] = (values[int(0.025 * draws)], values[int(0.975 * draws) - 1])
    return out


def shares(costs: dict[str, Any], mode: str, engines: Sequence[str]) -> list[tuple[str, float]]:
    """Each subset x engine's share of the matrix's attempt work in ``mode``, largest first."""
    table = work_table(costs, mode)
    parts = {
        f"{s}/{e}": n * PEER_K * table[(s, e)] for s, n in PEER_SUBSETS.items() for e in engines
    }
    total = sum(parts.values())
    return sorted(((k, v / total) for k, v in parts.items()), key=lambda kv: -kv[1])


def _print_inputs(costs: dict[str, Any], over: dict[str, Any], scale: dict[str, Any]) -> None:
    say(
        f"\n1. attempt cost (s per planned attempt, mean slot time; the median beside it), "
        f"{costs['tasks']} sampled tasks x k={costs['k']}:"
    )
    for mode in ("off", "profiled"):
        f = costs[mode]
        say(
            f"  {mode}: run wall {f['wall_s']:.0f} s, {f['rows']} rows; "
            f"{f['load_before']} -> {f['load_after']}"
        )
    say(f"  {'subset/engine':40s} {'off':>6s} {'prof.':>6s} {'+twin':>6s} {'median off':>10s}  n")
    for key in sorted(costs["off"]["mean_s"]):
        cells = [
            costs[m]["mean_s"].get(key, float("nan")) for m in ("off", "profiled_alone", "profiled")
        ]
        typical = costs["off"]["median_s"][key]
        counts = f"{costs['off']['samples'].get(key, 0)}/{costs['profiled']['samples'].get(key, 0)}"
        say(f"  {key:40s} " + " ".join(f"{c:6.2f}" for c in cells) + f" {typical:10.2f}  {counts}")
    say(f"  cold start ready ms (median): {costs['cold_start_ready_ms']}")
    say(
        f"\n2. Dask overhead per round: local {over['local']['round_s']:.3f} s, dask-local 1 "
        f"{over['dask']['round_s']:.3f} s -> {over['overhead_s'] * 1000:+.0f} ms per round "
        f"({over['rounds']} rounds each; local {over['local']['load_before']}, dask "
        f"{over['dask']['load_before']})"
    )
    if "unavailable" in scale:
        say(f"\n3. scaling efficiency: unavailable ({scale['unavailable']}); projection assumes 1")
    else:
        say(
            f"\n3. scaling (namespace hosts, one CPU each): N=1 warm span {scale['n1']['span_s']:.0f}"
            f" s ({scale['n1']['load_before']}), N=2 {scale['n2']['span_s']:.0f} s "
            f"({scale['n2']['load_before']}): e2 by span {scale['e2_span']:.3f} (tail included); "
            f"by {scale['paired_rounds']} paired rounds {scale['e2']:.3f} (used)"
        )


def _print_projection(
    name: str, found: dict[str, dict[int, float]], spread: dict[str, tuple[float, float]]
) -> None:
    say(f"\n{name}:")
    say(f"  {'hosts':36s}" + " ".join(f"{n:>8d}" for n in HOSTS) + "   8 hosts, 95% interval")
    for mode, label in MODES:
        low, high = spread[mode]
        row = " ".join(f"{found[mode][n]:7.2f}h" for n in HOSTS)
        say(f"  {label:36s}{row}   [{low:.2f}-{high:.2f}] h")


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks-per-subset", type=int, default=8)
    parser.add_argument("--k", type=int, default=1)
    parser.add_argument("--seed", default="projection", help="of the task sample")
    parser.add_argument("--raw-tasks", type=int, default=6, help="raw CDP tasks of 2. and 3.")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument(
        "--reuse", action="store_true", help="read the complete runs already in --out, run the rest"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(list(argv) if argv is not None else None)
    out = args.out or Path(tempfile.mkdtemp(prefix="mw-projection-"))
    REUSE["on"] = bool(args.reuse)
    say(f"full matrix projection: {load()}, {os.cpu_count()} CPUs, runs in {out}")
    sample = sample_tasks(args.tasks_per_subset, args.seed)
    costs = attempt_costs(out, sample, args.k)
    raw = sample_tasks(args.raw_tasks, args.seed)["l1.raw_cdp"]  # rounds enough for a median
    over = dask_overhead(out, raw, args.k)
    scale = {"unavailable": "--skip-scaling"} if args.skip_scaling else scaling(out, raw, args.k)
    _print_inputs(costs, over, scale)
    e2 = float(scale["e2"]) if "e2" in scale else None
    say(
        "\nassumed: moli and obscura cost what chrome costs per attempt (not obtainable here); "
        f"{', '.join(NOT_HERE)} cost the median measured driver path of each engine"
    )
    spread = intervals(costs, over["overhead_s"], e2, PEER_ENGINES)
    _print_projection(
        f"peer matrix, {sum(PEER_SUBSETS.values())} tasks x 4 engines x k=3 "
        f"= {sum(PEER_SUBSETS.values()) * 4 * PEER_K} rows",
        project(costs, over["overhead_s"], e2, PEER_ENGINES),
        spread,
    )
    _print_projection(
        "the same tasks x chrome, lightpanda (measurable here)",
        project(costs, over["overhead_s"], e2, MEASURED_ENGINES),
        intervals(costs, over["overhead_s"], e2, MEASURED_ENGINES),
    )
    say("\nwhere the profiled (interleaved) work goes, peer matrix, largest shares:")
    for key, share in shares(costs, "profiled", PEER_ENGINES)[:8]:
        say(f"  {key:45s} {share * 100:5.1f}%")
    found = project(costs, over["overhead_s"], e2, PEER_ENGINES)
    for mode in ("profiled", "sampled", "separate"):
        hours, (low, high) = found[mode][8], spread[mode]
        verdict = "met" if high < 1 else "NOT met" if low >= 1 else "undecided: 1 h is inside"
        say(
            f"goal (whole matrix, profiled, under 1 h on 8 hosts), {dict(MODES)[mode]}: "
            f"{hours:.2f} h [{low:.2f}-{high:.2f}] -> {verdict} ({load()})"
        )


if __name__ == "__main__":
    main()
