"""A Dask run's client as its own process, so a test can ``kill -9`` it and resume the run.

usage: dask_client.py OUT RUN_ID UNITS SLEEP_S (--dask-local N | --scheduler ADDRESS) [--resume]
"""

from __future__ import annotations

import argparse
import sys

import dask_helpers
from metewand.runtime.store import RunStore


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("run_id")
    parser.add_argument("units", type=int)
    parser.add_argument("sleep_s", type=float)
    parser.add_argument("--dask-local", type=int)
    parser.add_argument("--scheduler")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    ref = dask_helpers.ref(args.units, args.sleep_s)
    if args.resume:
        store = RunStore.open(f"{args.out}/{args.run_id}")
    else:
        store = RunStore.create(args.out, args.run_id, {"suite": ref.kind})
    with store:
        keys = dask_helpers.run_on_dask(store, ref, args.scheduler, args.dask_local)
    print(f"written {len(keys)} ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
