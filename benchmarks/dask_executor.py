"""The Dask executor's costs, each against a baseline measured in the same run (issue #14).

    .venv/bin/python benchmarks/dask_executor.py [--units 300] [--idle-s 20] [--sleep-units 8]
        [--only dispatch|idle|scaling]

1. Dispatch overhead per no-op unit: the same no-op units through ``LocalExecutor`` (one thread,
   one slot) and through ``DaskExecutor`` on a one-worker LocalCluster, all submitted at once and
   streamed back (how a run uses it). Per-unit figure = wall time from the first submit to the last
   outcome / units; cluster start-up is excluded (it is paid once per run). Also one unit at a
   time (submit, wait, next): the latency a unit sees. Target: Dask ≤ local + 5 ms per unit.
2. An idle worker's own CPU: one LocalCluster worker process, its slot open after one unit (so its
   host-telemetry sampler runs, as during a run), then left idle; utime+stime from
   ``/proc/<pid>/stat`` over ``--idle-s`` seconds, as a share of one core. The same worker with
   Dask's default configuration is measured too (the baseline the quiet configuration improves
   on). Target: ≤ 0.5 % of a core.
3. Scaling on sleep-bound units (each sleeps 200 ms in the worker): units/min with N = 1, 2, 4
   local workers, ``--sleep-units`` × N units each, as a ratio to N = 1. Target: ≥ 0.8 N.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metewand.runtime import suite as suite_registry
from metewand.runtime.dask_executor import DaskExecutor, UnitDone
from metewand.runtime.suite import Row, SuiteRef, Unit

KIND = "bench-dask"
CLK_TCK = os.sysconf("SC_CLK_TCK")


class NoSlot:
    def close(self) -> None:
        pass


@dataclass
class BenchSuite:
    """Units that do nothing (``sleep_s`` 0) or sleep in the worker; one key each."""

    sleep_s: float
    kind: str = KIND

    def units(self, count: int) -> list[Unit]:
        return [Unit((f"u{i}",), {"sleep_s": self.sleep_s}) for i in range(count)]

    def open_slot(self, slot_id: str) -> NoSlot:
        return NoSlot()

    def run_unit(self, slot: Any, unit: Unit, events: Any = None) -> list[Row]:
        if unit.payload["sleep_s"]:
            time.sleep(unit.payload["sleep_s"])
        row = {"key": unit.keys[0], "status": "passed"}
        if events is not None:
            events.attempt_started(unit.keys[0])
            events.attempt_finished(row)
        return [row]

    def prepare(self) -> None:
        pass

    def interrupt(self) -> None:
        pass

    def teardown(self) -> None:
        pass

    def finish(self, completed: bool) -> None:
        pass


def from_ref(ref: SuiteRef) -> BenchSuite:
    return BenchSuite(float(ref.config["sleep_s"]))


def bench_ref(sleep_s: float) -> SuiteRef:
    # the benchmark script's directory is on every spawned worker's sys.path
    suite_registry.register(KIND, "dask_executor:from_ref")
    return SuiteRef(KIND, {"sleep_s": sleep_s})


def drain(executor: DaskExecutor, units: list[Unit]) -> int:
    return sum(1 for outcome in executor.stream(units) if isinstance(outcome, UnitDone))


class CountingSink:
    def __init__(self) -> None:
        self.rows = 0

    def attempt_started(self, label: str) -> None:
        pass

    def attempt_finished(self, row: Row) -> None:
        self.rows += 1


def local_per_unit_s(units: list[Unit]) -> float:
    """The same units through the local executor, one slot."""
    suite = BenchSuite(0.0)
    try:  # the run lifecycle's executor (issue #14 step 1): run(suite, units, sink)
        from metewand.runtime.executor import LocalExecutor  # type: ignore[import-not-found]

        sink = CountingSink()
        started = time.perf_counter()
        LocalExecutor(1).run(suite, units, sink)
        elapsed, done = time.perf_counter() - started, sink.rows
    except ImportError:  # before it: schedule.py's attempt executor
        from metewand.runtime.schedule import AttemptSpec
        from metewand.runtime.schedule import LocalExecutor as AttemptExecutor

        slot = NoSlot()
        with AttemptExecutor(lambda s: suite.run_unit(slot, Unit.from_json(s.payload))[0]) as ex:
            started = time.perf_counter()
            done = sum(1 for _ in ex.run_all(AttemptSpec(u.keys[0], u.to_json()) for u in units))
            elapsed = time.perf_counter() - started
    assert done == len(units)
    return elapsed / len(units)


def dispatch(count: int) -> None:
    units = BenchSuite(0.0).units(count)
    local = local_per_unit_s(units)
    with DaskExecutor(bench_ref(0.0), local_workers=1) as executor:
        drain(executor, units[:5])  # warm: slot open, functions cached on the worker
        started = time.perf_counter()
        assert drain(executor, units) == count
        pipelined = (time.perf_counter() - started) / count
        one_by_one = []
        for unit in units[:50]:
            started = time.perf_counter()
            drain(executor, [unit])
            one_by_one.append(time.perf_counter() - started)
    single = sorted(one_by_one)[len(one_by_one) // 2]
    print(f"dispatch, {count} no-op units (one worker, pipelined):")
    print(f"  local executor      {local * 1e3:8.3f} ms/unit")
    print(f"  dask executor       {pipelined * 1e3:8.3f} ms/unit")
    extra = (pipelined - local) * 1e3
    print(
        f"  dask - local        {extra:8.3f} ms/unit   target <= 5 ms: {'ok' if extra <= 5 else 'MISSED'}"
    )
    print(f"  one unit at a time  {single * 1e3:8.3f} ms/unit (median of 50, dask, for latency)")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)


def idle_shares(idle_s: float, quiet: bool) -> tuple[float, float]:
    """Share of a core the worker process used while idle: before any unit (registered, no slot)
    and after one unit (slot open, its host-telemetry sampler running)."""
    config = None if quiet else {}  # {}: Dask's defaults for this one cluster
    with DaskExecutor(bench_ref(0.0), local_workers=1, worker_config=config) as executor:
        (pid,) = executor.client.run(os.getpid).values()
        time.sleep(2)  # start-up settles
        bare = share_over(pid, idle_s)
        drain(executor, BenchSuite(0.0).units(1))
        time.sleep(2)
        with_slot = share_over(pid, idle_s)
    return bare, with_slot


def share_over(pid: int, seconds: float) -> float:
    before, started = cpu_ticks(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_ticks(pid) - before) / CLK_TCK / (time.monotonic() - started)


def idle(idle_s: float) -> None:
    quiet = idle_shares(idle_s, quiet=True)
    default = idle_shares(idle_s, quiet=False)
    print(f"idle worker's own CPU, {idle_s:.0f} s each (/proc utime+stime, {CLK_TCK} ticks/s):")
    for label, (bare, with_slot) in (
        ("metewand's quiet config", quiet),
        ("Dask's default config", default),
    ):
        print(
            f"  {label:24} no slot {bare * 100:6.3f} %   slot + telemetry {with_slot * 100:6.3f} % of a core"
        )
    verdict = "ok" if quiet[1] <= 0.005 else "MISSED"
    print(
        f"  target <= 0.5 % (quiet, slot open): {verdict}; quiet/default (no slot) = {quiet[0] / default[0] if default[0] else float('nan'):.2f}"
    )


def scaling(per_worker: int) -> None:
    rates = {}
    for workers in (1, 2, 4):
        count = per_worker * workers
        with DaskExecutor(bench_ref(0.2), local_workers=workers) as executor:
            started = time.perf_counter()
            assert drain(executor, BenchSuite(0.2).units(count)) == count
            rates[workers] = count / (time.perf_counter() - started) * 60
    print(f"scaling, 200 ms sleep-bound units ({per_worker} per worker):")
    for workers, rate in rates.items():
        ratio = rate / rates[1]
        verdict = "ok" if ratio >= 0.8 * workers else "MISSED"
        print(
            f"  N={workers}  {rate:7.1f} units/min  {ratio:5.2f}x N=1   target >= {0.8 * workers:.1f}x: {verdict}"
        )


def loadavg() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, default=300)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--sleep-units", type=int, default=8)
    parser.add_argument("--only", choices=("dispatch", "idle", "scaling"))
    args = parser.parse_args()
    print(f"load average at start: {loadavg()} on {os.cpu_count()} CPUs")
    if args.only in (None, "dispatch"):
        dispatch(args.units)
    if args.only in (None, "idle"):
        idle(args.idle_s)
    if args.only in (None, "scaling"):
        scaling(args.sleep_units)
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
