"""Two versions of one piece of the browser harness, switched attempt by attempt inside one run
(issue 24: the harness's CPU and wall between attempts).

Runs ``metewand browser run`` in this process. At each attempt's start a switch (``--switch``)
picks the attempt's arm:

- ``json``: canonical records and CDP messages through orjson (on) or the standard library's
  ``json`` (off);
- ``cdp-log``: the CDP log's lines written by ``canonical.dumps_parsed`` (on) or by
  ``canonical.line``, which walks each frame first (off).

**Who gets which arm.** Within a round (every task once, in the plan's fixed order) the arms go
ABBA; from one round to the next every task changes arm. Each task so meets both arms, and the
estimate pairs **the same task** in rounds 1 and 2, 3 and 4, ...: task-to-task differences leave
the comparison. (An earlier form of this script, ``json_writer_ab.py``, paired neighbouring
attempts and gave each task the same arm in every round when the round's length was a multiple
of four: its arms then held different tasks.)

Per attempt, charged to its arm:

- CPU: the process's (``getrusage``, every thread) from the attempt's start to the next's; an
  attempt's row and artifacts are written before the next starts, so they fall in its share;
- between: the wall from its start to the next's, less its ``duration_ms``;
- duration: its ``duration_ms``.

Prints each arm's median and, per figure, on minus off over the task pairs: median with a
bootstrap 95% CI, and the mean. ``--k`` must be even.

    .venv/bin/python benchmarks/in_run_ab.py --switch json --subset l1.raw_cdp \
        --engine lightpanda --per-subset 40 --k 6
    .venv/bin/python benchmarks/in_run_ab.py --switch cdp-log --subset l1.raw_cdp \
        --engine lightpanda --per-subset 40 --k 8
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from harness_profile import CORPUS, task_ids

from metewand import canonical
from metewand.suites.browser import attempt_runner, cdp

ORJSON_PARSED, ORJSON_TEXT = cdp._parsed, cdp._message_text


def _stdlib_text(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def use_orjson(on: bool) -> None:
    canonical._orjson = orjson if on else None
    cdp._parsed = ORJSON_PARSED if on else json.loads  # type: ignore[assignment]
    cdp._message_text = ORJSON_TEXT if on else _stdlib_text  # type: ignore[assignment]


PARSED_LOG_LINE = cdp._log_line


def _checked_log_line(record: Any) -> bytes:
    """The CDP log's line as written before ``canonical.dumps_parsed``: the checked walk (a
    frame it refuses goes to the parsed path, which refuses it too and writes it as text)."""
    try:
        return canonical.line(record.to_json())
    except canonical.CanonicalJSONError:
        return PARSED_LOG_LINE(record)


def use_parsed_log_lines(on: bool) -> None:
    cdp._log_line = PARSED_LOG_LINE if on else _checked_log_line  # type: ignore[assignment]


SWITCHES: dict[str, tuple[Callable[[bool], None], str, str]] = {
    "json": (use_orjson, "orjson", "json"),
    "cdp-log": (use_parsed_log_lines, "dumps_parsed", "checked"),
}


@dataclass
class Attempt:
    task: str
    round_: int
    on: bool
    cpu_s: float
    wall_s: float
    duration_ms: float | None = None


def process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def abba(index: int) -> bool:
    return index % 2 == (index // 2) % 2


def install_switch(switch: Callable[[bool], None], seen: list[Attempt]) -> None:
    """Each attempt's start: its arm (ABBA within the round, flipped every round), its CPU."""
    original = attempt_runner.AttemptRunner._attempt
    started_in_round: dict[int, int] = {}

    async def switched(self: Any, planned: Any, *args: Any, **kwargs: Any) -> Any:
        in_round = started_in_round.get(planned.attempt, 0)
        started_in_round[planned.attempt] = in_round + 1
        on = abba(in_round) != (planned.attempt % 2 == 0)
        switch(on)
        record = Attempt(
            planned.task.task_id, planned.attempt, on, process_cpu_s(), time.perf_counter()
        )
        seen.append(record)
        row = await original(self, planned, *args, **kwargs)
        record.duration_ms = row.get("duration_ms")
        return row

    attempt_runner.AttemptRunner._attempt = switched  # type: ignore[method-assign]


def run(switch: str, subset: str, engine: str, per_subset: int, k: int) -> list[Attempt]:
    seen: list[Attempt] = []
    install_switch(SWITCHES[switch][0], seen)
    if switch == "json":
        canonical.use_orjson = lambda: False  # type: ignore[assignment]  # the switch decides
    os.environ.setdefault("LIGHTPANDA_DISABLE_TELEMETRY", "true")
    from metewand.cli.entry import main as metewand

    with tempfile.TemporaryDirectory() as out:
        argv = ["metewand", "browser", "run", "--tasks", str(CORPUS), "--subset", subset]
        for task in task_ids(subset, per_subset):
            argv += ["--task", task]
        argv += ["--engines", engine, "--k", str(k), "--jobs", "1", "--seed", "ab"]
        sys.argv = [*argv, "--out", out, "--run-id", "ab", "--no-progress", "--quiet"]
        with contextlib.suppress(SystemExit):
            metewand()
    return seen


def figures(seen: list[Attempt]) -> dict[str, dict[tuple[str, int], tuple[bool, float]]]:
    """Per figure: (task, round) -> (arm, value), for every attempt with a next one."""
    out: dict[str, dict[tuple[str, int], tuple[bool, float]]] = {
        "CPU": {},
        "between": {},
        "duration": {},
    }
    for this, following in zip(seen, seen[1:], strict=False):
        if this.duration_ms is None:
            continue
        key = (this.task, this.round_)
        out["CPU"][key] = (this.on, (following.cpu_s - this.cpu_s) * 1e3)
        out["between"][key] = (this.on, (following.wall_s - this.wall_s) * 1e3 - this.duration_ms)
        out["duration"][key] = (this.on, float(this.duration_ms))
    return out


def task_pairs(values: dict[tuple[str, int], tuple[bool, float]]) -> list[float]:
    """On minus off for each task in rounds (1, 2), (3, 4), ...: its two arms."""
    out = []
    for (task, round_), (on, value) in values.items():
        if round_ % 2 == 0:
            continue
        other = values.get((task, round_ + 1))
        if other is None or other[0] == on:
            continue
        out.append(value - other[1] if on else other[1] - value)
    return out


def report(switch: str, seen: list[Attempt]) -> None:
    _, on_name, off_name = SWITCHES[switch]
    for name, values in figures(seen).items():
        for arm, label in ((True, on_name), (False, off_name)):
            ms = [v for on, v in values.values() if on is arm]
            print(f"{name:8s} {label:13s}: {len(ms)} attempts, median {np.median(ms):.3f} ms")
        pairs = np.array(task_pairs(values))
        draws = np.random.default_rng(24).choice(pairs, size=(4000, len(pairs)))
        low, high = np.percentile(np.median(draws, axis=1), [2.5, 97.5])
        print(
            f"{name:8s} {on_name} - {off_name}: median {np.median(pairs):+.3f} ms "
            f"[{low:+.3f}, {high:+.3f}] (bootstrap 95% CI, {len(pairs)} task pairs); "
            f"mean {pairs.mean():+.3f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switch", choices=sorted(SWITCHES), required=True)
    parser.add_argument("--subset", default="l1.raw_cdp")
    parser.add_argument("--engine", default="lightpanda")
    parser.add_argument("--per-subset", type=int, default=40)
    parser.add_argument("--k", type=int, default=6)
    args = parser.parse_args()
    if args.k < 2 or args.k % 2:
        parser.error("--k must be even: each task's arms are paired over two rounds")
    report(args.switch, run(args.switch, args.subset, args.engine, args.per_subset, args.k))


if __name__ == "__main__":
    main()
