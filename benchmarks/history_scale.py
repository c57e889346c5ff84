"""History speed targets (issue #23): ``history add`` of a 20,000-row run, ``history show`` over
1,000 runs x 100 groups, ``history report`` over the same.

The 20,000-row run is a real sorting run's rows repeated under new keys (~230 MB of JSON); the
1,000 x 100 store is synthetic (``metewand.history.synthetic``, 3 attempts per group and run, a
15% step in 3 groups at run 900). Each figure is printed beside a baseline measured in the same
run: for add, reading the same file with Python's json module (what any Python reader of the
run pays); for show and report, one DuckDB scan of the store's values. Targets: add <= 2 s,
show <= 1 s, report <= 30 s (on a quiet host; the load average is printed).

    .venv/bin/python benchmarks/history_scale.py [--rows 20000] [--runs 1000] [--groups 100]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
METEWAND = str(REPO / ".venv" / "bin" / "metewand")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one command."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = os.times()
    return wall, (after.children_user - before.children_user) + (
        after.children_system - before.children_system)  # fmt: skip


def big_run(work: Path, rows: int) -> Path:
    subprocess.run([METEWAND, "run", str(REPO / "examples/sorting/metewand.toml"), "--run-id",
                    "seed", "--no-progress", "--quiet", "--no-history"], cwd=work, check=True,
                   capture_output=True)  # fmt: skip
    seed = work / "runs" / "seed"
    big = work / "runs" / "big"
    shutil.copytree(seed, big)
    lines = (seed / "results.jsonl").read_text().splitlines()
    with open(big / "results.jsonl", "w") as out:
        for i in range(rows):
            row = json.loads(lines[i % len(lines)])
            row["key"] = f"c{i // len(lines)}/{row['key']}"
            out.write(json.dumps(row) + "\n")
    return big


def json_baseline(path: Path) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    with open(path, "rb") as handle:
        for line in handle:
            json.loads(line)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=100)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="metewand-hscale-"))
    try:
        print(f"history_scale: load {load()}", flush=True)
        big = big_run(work, args.rows)
        size = (big / "results.jsonl").stat().st_size / 2**20
        base = json_baseline(big / "results.jsonl")
        add = timed([METEWAND, "history", "add", str(big), "--history", "add.duckdb"], work)
        print(f"add {args.rows} rows ({size:.0f} MiB): wall {add[0]:.2f} s, CPU {add[1]:.2f} s "
              f"(target 2 s); json.loads of the same file: wall {base[0]:.2f} s, CPU "
              f"{base[1]:.2f} s; add/json {add[0] / base[0]:.2f}x; load {load()}", flush=True)  # fmt: skip
        from metewand.history import store, synthetic

        synthetic.build(work / "scale.duckdb", args.runs, args.groups, step=0.15, step_at=900,
                        step_groups=3)  # fmt: skip
        start = time.perf_counter()
        with store.reading(work / "scale.duckdb") as con:
            con.execute("SELECT sum(value), count(*) FROM attempt_values").fetchone()
        scan = time.perf_counter() - start
        show = timed([METEWAND, "history", "show", "--history", "scale.duckdb", "--last", "30"],
                     work)  # fmt: skip
        show_json = timed([METEWAND, "history", "show", "--history", "scale.duckdb", "--json"],
                          work)  # fmt: skip
        report = timed([METEWAND, "history", "report", "--history", "scale.duckdb", "--out",
                        "site"], work)  # fmt: skip
        print(f"store {args.runs} runs x {args.groups} groups: one DuckDB scan (open + sum) "
              f"{scan:.2f} s", flush=True)  # fmt: skip
        for name, (wall, cpu), target in (("show --last 30", show, 1), ("show --json", show_json, 1),
                                          ("report", report, 30)):  # fmt: skip
            print(f"{name}: wall {wall:.2f} s, CPU {cpu:.2f} s (target {target} s); "
                  f"{wall / scan:.1f}x the scan; load {load()}", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
