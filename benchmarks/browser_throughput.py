"""Browser-run throughput: attempts per minute on l1.raw_cdp per engine (k=1, jobs=1), and the
share of attempt wall time spent in metewand itself.

    .venv/bin/python benchmarks/browser_throughput.py [--tasks DIR] [--engines chrome,lightpanda]
                                                      [--limit N]

For each engine a separate real run (``metewand browser run`` machinery) is made into a temp
directory. Figures, all from that run's own rows:
- attempts/min = attempts / run wall (engine launch and teardown included);
- attempt wall = sum of rows' ``duration_ms`` (page target, driver, grading, cleanup);
- CDP wait = sum of rows' ``cdp.wait_ms`` (time blocked on the browser: command round-trips and
  event waits, from ``CdpClient.timing``);
- metewand share = (attempt wall - CDP wait) / attempt wall: interpreter, substitution, checks,
  fixture serving and the asyncio loop. ``sleep`` steps and readiness polls count as metewand
  time here, so the share is an upper bound on harness overhead.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.runner import run_browser
from metewand.suites.browser.tasks import load_corpus, select_tasks

DEFAULT_CORPUS = str(Path(__file__).resolve().parents[2] / "shared" / "corpus" / "lexbench")
SUBSET = "l1.raw_cdp"


def measure(corpus: str, engine: str, task_ids: tuple[str, ...], out: Path) -> dict[str, float]:
    config = RunConfig(
        corpus, (engine,), k=1, jobs=1, seed="throughput", subsets=(SUBSET,), task_ids=task_ids
    )
    started = time.perf_counter()
    result = run_browser(config, out, f"tp-{engine}", progress_mode="quiet", echo=lambda _t: None)
    wall_s = time.perf_counter() - started
    assert result.run_dir is not None and result.exit_code == 0
    rows = [
        json.loads(line)
        for line in (result.run_dir / "results.jsonl").read_text().split("\n")
        if line.strip()
    ]
    ran = [r for r in rows if r.get("duration_ms") is not None and r.get("cdp")]
    attempt_ms = sum(r["duration_ms"] for r in ran)
    cdp_ms = sum(r["cdp"]["wait_ms"] for r in ran)
    return {
        "attempts": len(rows),
        "passed": sum(r["status"] == "pass" for r in rows),
        "run_wall_s": wall_s,
        "attempts_per_min": len(rows) / wall_s * 60,
        "attempt_wall_s": attempt_ms / 1000,
        "cdp_wait_s": cdp_ms / 1000,
        "metewand_s": (attempt_ms - cdp_ms) / 1000,
        "metewand_share": (attempt_ms - cdp_ms) / attempt_ms if attempt_ms else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default=DEFAULT_CORPUS)
    parser.add_argument("--engines", default="chrome,lightpanda")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    args = parser.parse_args()
    tasks = select_tasks(load_corpus(args.tasks).tasks, subsets=[SUBSET])
    task_ids = tuple(t.task_id for t in tasks[: args.limit]) if args.limit else ()
    print(
        f"{'engine':<12}{'attempts':>9}{'pass':>6}{'run wall s':>11}{'att/min':>9}"
        f"{'attempt wall s':>15}{'CDP wait s':>11}{'metewand s':>11}{'share':>8}"
    )
    with tempfile.TemporaryDirectory(prefix="metewand-throughput-") as out:
        for engine in args.engines.split(","):
            m = measure(args.tasks, engine, task_ids, Path(out))
            print(
                f"{engine:<12}{m['attempts']:>9}{m['passed']:>6}{m['run_wall_s']:>11.1f}"
                f"{m['attempts_per_min']:>9.1f}{m['attempt_wall_s']:>15.1f}"
                f"{m['cdp_wait_s']:>11.1f}{m['metewand_s']:>11.1f}"
                f"{m['metewand_share']:>8.1%}"
            )


if __name__ == "__main__":
    main()
