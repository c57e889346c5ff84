"""What orjson saves the browser harness, measured inside one run (issue 24: harness CPU per attempt).

A run writes its canonical records (rows, CDP logs, artifacts) through ``canonical``, and the CDP
client reads and writes each message; both use orjson in a run (``canonical.use_orjson``, the
client's ``_parsed`` and ``_message_text``) and the standard library's ``json`` without it. This
runs ``metewand browser run`` in this process and switches between the two at each attempt's
start, in ABBA order, so both arms meet the same host, the same engine process and the same
tasks. The process's CPU (``getrusage``: user + system, every thread, to the microsecond) from
one attempt's start to the next is charged to the first one's writer; the row of an attempt is
written before the next one starts, so it falls in its own attempt's share.

Prints each arm's CPU per attempt and the paired difference (orjson minus json, per adjacent
pair) with its median and a bootstrap 95% CI over the pairs.

    .venv/bin/python benchmarks/json_writer_ab.py --subset l1.raw_cdp --engine lightpanda \
        --per-subset 40 --k 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import tempfile
from typing import Any

import numpy as np
import orjson
from harness_profile import CORPUS, task_ids

from metewand import canonical
from metewand.suites.browser import attempt_runner, cdp

ORJSON_PARSED, ORJSON_TEXT = cdp._parsed, cdp._message_text


def _stdlib_text(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def use_writer(fast: bool) -> None:
    canonical._orjson = orjson if fast else None
    cdp._parsed = ORJSON_PARSED if fast else json.loads  # type: ignore[assignment]
    cdp._message_text = ORJSON_TEXT if fast else _stdlib_text  # type: ignore[assignment]


def process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def install_switch(starts: list[tuple[bool, float]]) -> None:
    """Each attempt's start: pick its writer (ABBA: fast, json, json, fast, ...), read the CPU."""
    attempt = attempt_runner.AttemptRunner._attempt

    async def switched(self: Any, *args: Any, **kwargs: Any) -> Any:
        index = len(starts)
        fast = index % 2 == (index // 2) % 2
        use_writer(fast)
        starts.append((fast, process_cpu_s()))
        return await attempt(self, *args, **kwargs)

    attempt_runner.AttemptRunner._attempt = switched  # type: ignore[method-assign]


def run(subset: str, engine: str, per_subset: int, k: int) -> list[tuple[bool, float]]:
    starts: list[tuple[bool, float]] = []
    install_switch(starts)
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
    return starts


def report(starts: list[tuple[bool, float]]) -> None:
    # the first attempt carries the engine's launch: the window starts at the second
    spans = [
        (fast, (b - a) * 1e3) for (fast, a), (_, b) in zip(starts[1:], starts[2:], strict=False)
    ]
    for fast, name in ((True, "orjson"), (False, "json")):
        ms = [cpu for arm, cpu in spans if arm is fast]
        print(f"{name:6s}: {len(ms)} attempts, CPU per attempt median {np.median(ms):.2f} ms")
    pairs = np.array(adjacent_differences(spans))
    draws = np.random.default_rng(24).choice(pairs, size=(4000, len(pairs)))
    low, high = np.percentile(np.median(draws, axis=1), [2.5, 97.5])
    print(
        f"orjson - json, per attempt: median {np.median(pairs):+.3f} ms [{low:+.3f}, {high:+.3f}]"
        f" (bootstrap 95% CI, {len(pairs)} adjacent pairs); mean {pairs.mean():+.3f} ms"
    )


def adjacent_differences(spans: list[tuple[bool, float]]) -> list[float]:
    """orjson minus json over neighbouring attempts of the two writers, each attempt in one pair
    (ABBA makes the neighbours of a pair share a writer: those are stepped over)."""
    out: list[float] = []
    index = 0
    while index + 1 < len(spans):
        (fast, a), (other, b) = spans[index], spans[index + 1]
        if fast == other:
            index += 1
            continue
        out.append(a - b if fast else b - a)
        index += 2
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subset", default="l1.raw_cdp")
    parser.add_argument("--engine", default="lightpanda")
    parser.add_argument("--per-subset", type=int, default=40)
    parser.add_argument("--k", type=int, default=4)
    args = parser.parse_args()
    report(run(args.subset, args.engine, args.per_subset, args.k))


if __name__ == "__main__":
    main()
