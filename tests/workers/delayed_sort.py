"""Test implementation for the sorting example: built-in sort plus a fixed, scalable delay.

``METEWAND_TEST_DELAY_MS`` (default 0) is slept inside execute, times
``METEWAND_TEST_SLOWDOWN`` (default 1.0): a run with slowdown 1.3 is a worker made 30% slower
on a sleep-dominated operation. With ``METEWAND_TEST_BURN=1`` the delay is spent burning CPU
instead (a loop on the process's CPU clock): its CPU time stays steady on a loaded host, where
a sleep's wake-up can come tens of milliseconds late.
"""

import os
import sys
import time

sys.path.insert(0, os.environ["METEWAND_SORTING_WORKERS"])

from common import read_values, write_sorted  # noqa: E402

from metewand.worker import Implementation  # noqa: E402

impl = Implementation()
DELAY_S = float(os.environ.get("METEWAND_TEST_DELAY_MS", "0")) / 1000
SLOWDOWN = float(os.environ.get("METEWAND_TEST_SLOWDOWN", "1.0"))
BURN = os.environ.get("METEWAND_TEST_BURN") == "1"  # spend the delay on the CPU, not asleep


def delay(seconds: float) -> None:
    if not BURN:
        time.sleep(seconds)
        return
    stop = time.process_time() + seconds
    while time.process_time() < stop:
        pass


@impl.prepare
def load(request: dict) -> list[int]:
    return read_values(request["dataset_dir"])


@impl.execute
def run(values: list[int], result_dir: str) -> tuple[dict, dict]:
    delay(DELAY_S * SLOWDOWN)
    out = sorted(values)
    write_sorted(result_dir, out)
    return {"count": len(out)}, {"algorithm": "timsort+delay"}


if __name__ == "__main__":
    raise SystemExit(impl.serve())
