"""How steady is this machine's CPU speed? Fixed work, timed in slices, on each CPU.

On a virtual machine the same instructions can take a different amount of CPU time from one
moment to the next: the hypervisor's other tenants share caches, memory bandwidth and clock.
Steal time does not show it (the vCPU is running, only slower), the load average does not show
it, and on this project's VMs it moved a pure-Python loop's CPU time 2x between 150 ms slices
with nothing else running (benchmarks/README.md, compare_false_alarms.py). A CPU-time
comparison cannot see through that noise, so ``metewand doctor`` measures it and says what it
costs: how many interleaved pairs a comparison needs to tell a change of a given size.

The probe runs a fixed pure-Python loop, calibrated to ``slice_ms`` of this thread's CPU time,
``slices`` times on each CPU this process may use (the thread pinned to it; the affinity is put
back afterwards), and reads each slice with ``CLOCK_THREAD_CPUTIME_ID``. Its figure is the
standard deviation of log(slice time): the spread of one measurement of fixed work.

``pairs_needed`` turns that spread into a sample size under a stated model: each measurement's
log time has that SD independently (pairing cancels nothing faster than one measurement), so a
pair's log ratio has SD sqrt(2) x s, and the figure is the fewest pairs with which a
two-sided paired t-test at 5% finds log(1 + change) with 80% power (the noncentral t's exact
power). The model's figure is checked by simulation in tests/test_measure_cpu_steadiness.py.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Any

from metewand.measure.order_stats import middle

CALIBRATION_NS = 2_000_000  # the first guess's work, timed to scale the loop to slice_ms
POWER_CHANGES = (0.05, 0.10, 0.20)


def spin(iterations: int) -> int:
    """The probe's fixed work: ``iterations`` of a pure-Python loop (``calibrate`` sizes it)."""
    total = 0
    for i in range(iterations):
        total += i * i
    return total


def _timed(iterations: int) -> int:
    start = time.thread_time_ns()
    spin(iterations)
    return time.thread_time_ns() - start


def calibrate(slice_ns: int) -> int:
    """Loop iterations that take about ``slice_ns`` of this thread's CPU time."""
    iterations = 20_000
    while (spent := _timed(iterations)) < CALIBRATION_NS:
        iterations *= 4
    typical = sorted((spent, _timed(iterations), _timed(iterations)))[1]
    return max(1, round(iterations * slice_ns / typical))


def _log_sd(values: list[float]) -> float:
    return statistics.stdev(math.log(v) for v in values)


def _slices_on(cpu: int, iterations: int, slices: int) -> list[float]:
    os.sched_setaffinity(0, {cpu})
    _timed(iterations)  # the first slice after a migration pays for cold caches: not kept
    return [_timed(iterations) / 1e6 for _ in range(slices)]


def pairs_needed(log_sd: float, change: float, power: float = 0.80, alpha: float = 0.05) -> int:
    """The fewest pairs with which a two-sided paired t-test finds ``change`` (0.10: 10%) with
    ``power``, when each measurement's log time has SD ``log_sd`` (the module's model). Power
    is the noncentral t's exact tail, so small samples are not flattered."""
    from scipy import special  # not scipy.stats: half the import time, the same functions

    if log_sd <= 0:
        return 2
    effect = math.log1p(change) / (math.sqrt(2) * log_sd)  # the pair's mean over its SD

    def power_at(n: int) -> float:
        df, shift = n - 1, effect * math.sqrt(n)
        critical = float(special.stdtrit(df, 1 - alpha / 2))
        upper = 1.0 - float(special.nctdtr(df, shift, critical))
        lower = float(special.nctdtr(df, shift, -critical))  # the wrong-sign tail: nan when
        return upper + (lower if math.isfinite(lower) else 0.0)  # scipy underflows, i.e. ~0

    # the normal approximation never asks for more than the t-test needs: start below it
    z = statistics.NormalDist().inv_cdf
    n = max(2, math.floor(((z(1 - alpha / 2) + z(power)) / effect) ** 2))
    while power_at(n) < power:
        n += 1
    return n


def probe(slice_ms: float = 20.0, slices: int = 15) -> dict[str, Any]:
    """Time ``slices`` slices of fixed work on each CPU this process may use."""
    if slices < 3:
        raise ValueError("slices must be >= 3")
    allowed = sorted(os.sched_getaffinity(0))
    try:
        iterations = calibrate(int(slice_ms * 1e6))
        per_cpu = {cpu: _slices_on(cpu, iterations, slices) for cpu in allowed}
    finally:
        os.sched_setaffinity(0, allowed)
    every = [ms for times in per_cpu.values() for ms in times]
    median = middle(every)
    log_sd = _log_sd(every)
    return {
        "method": "a fixed pure-Python loop, timed with the thread's CPU clock, pinned per CPU",
        "slice_ms": slice_ms,
        "slices_per_cpu": slices,
        "cpus": {
            str(cpu): {
                "median_ms": round(middle(times), 3),
                "min_ms": round(min(times), 3),
                "max_ms": round(max(times), 3),
                "log_sd": round(_log_sd(times), 4),
            }
            for cpu, times in per_cpu.items()
        },
        "median_ms": round(median, 3),
        "range_of_median": [round(min(every) / median, 3), round(max(every) / median, 3)],
        "log_sd": round(log_sd, 4),
        "pairs_needed": {f"{c:.0%}": pairs_needed(log_sd, c) for c in POWER_CHANGES},
        "pairs_model": "independent log-normal noise per measurement; two-sided paired t-test "
        "at 5%, 80% power",
    }
