"""What the compute suite's phase marks cost per attempt (issue 16), and an A/B of marks on/off.

Each compute attempt marks its phases (``suites/compute/phase_marks.py``): every mark reads the
cheap counters of one accounting group through a ``measure.mark_probe`` probe (a snapshot: preads
of descriptors kept open; decoding happens when the record is built, outside the attempt's
timed envelope). This script runs real attempts of the no-op Python SDK
worker (tests/workers/fault_worker.py, mode ok: the smallest timed wall, so a mark's cost is
the largest share it can be) through ``run_fixed_dataset_outcome`` and reports, in one run:

- reads per attempt, counted (every snapshot is counted and timed inside the attempts);
- the median cost of one read (snapshot) there, and reads x read cost per attempt; the deferred
  decoding's cost per read beside it (it runs after the envelope);
- an A/B: attempts with marks on and off interleaved (ABBA), the median timed_wall_time_ns of
  each, their difference with a bootstrap 95% CI, and the same for the whole attempt's wall.
  Inside the prepare_and_execute envelope sit 2 of the reads (the integrity_check and execute
  marks; the prepare mark comes before the envelope starts, the closing one after it ends), so
  the Δ attributable to marks is about 2 x the read cost. The paired Δ (median of on - off over
  neighbouring attempts) is the steadier of the two on a loaded host. Marks off is
  ``run_fixed_dataset_outcome(phase_marks=False)``, what ``metewand run --no-phase-marks`` does.
- the marks' own time inside the envelope, timed where it is spent: the two whole
  ``AttemptPhases.mark`` calls inside it (snapshot, lock, bookkeeping), summed per attempt, its
  median with a bootstrap 95% CI and as a share of the median timed wall with marks off. On
  and off run the same code inside the envelope but for these calls, so this is the Δ
  attributable to marks, without the load's noise that the A/B's CI carries.

    .venv/bin/python benchmarks/compute_marks.py [--attempts 40] [--backend auto]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from metewand.suites.compute import phase_marks
from metewand.suites.compute.api import FixedDatasetResult, run_fixed_dataset_outcome

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "workers" / "fault_worker.py"
READS_IN_ENVELOPE = 2
RESAMPLES = 2000


class TimedProbe:
    """A probe that times its snapshots (the reads at marks) and its decoding (after them)."""

    def __init__(self, probe: Any, log: ReadLog) -> None:
        self.probe, self.log, self.peak_method = probe, log, probe.peak_method

    def snap(self) -> Any:
        start = time.perf_counter_ns()
        raw = self.probe.snap()
        self.log.walls_ns.append(time.perf_counter_ns() - start)
        return raw

    def decode(self, raw: Any) -> Any:
        start = time.perf_counter_ns()
        counters = self.probe.decode(raw)
        self.log.decode_ns.append(time.perf_counter_ns() - start)
        return counters

    def close(self) -> None:
        self.probe.close()


class ReadLog:
    """Wraps the probes the attempts open: counts and times every snapshot and decoding."""

    def __init__(self) -> None:
        self.walls_ns: list[int] = []
        self.decode_ns: list[int] = []
        self.in_envelope_ns: list[int] = []  # per attempt: the in-envelope mark calls' sum
        self.original = phase_marks.probe_of
        self.original_mark = phase_marks.AttemptPhases.mark

    def install(self) -> None:
        def timed_probe(accounting: Any) -> TimedProbe:
            return TimedProbe(self.original(accounting), self)

        original_mark = self.original_mark
        log = self

        def timed_mark(phases: Any, role: str, name: str | None) -> None:
            start = time.perf_counter_ns()
            original_mark(phases, role, name)
            spent = time.perf_counter_ns() - start
            if not phases.enabled:  # the off arm: the call returns at once
                return
            if role == "implementation" and name == "integrity_check":
                log.in_envelope_ns.append(spent)  # the first of the two inside the envelope
            elif role == "implementation" and name == "execute":
                log.in_envelope_ns[-1] += spent

        phase_marks.probe_of = timed_probe  # type: ignore[assignment]
        phase_marks.AttemptPhases.mark = timed_mark  # type: ignore[method-assign]

    def uninstall(self) -> None:
        phase_marks.probe_of = self.original  # type: ignore[assignment]
        phase_marks.AttemptPhases.mark = self.original_mark  # type: ignore[method-assign]

    def clear(self) -> None:
        self.walls_ns.clear()
        self.decode_ns.clear()
        self.in_envelope_ns.clear()


def attempt(tmp: Path, backend: str, marks: bool) -> tuple[int, int]:
    """(timed wall ns, whole attempt wall ns) of one attempt."""
    impl = [sys.executable, str(WORKER), "impl"]
    evaluator = [sys.executable, str(WORKER), "eval"]
    start = time.monotonic_ns()
    outcome = run_fixed_dataset_outcome(
        str(tmp),
        impl,
        evaluator,
        private_root=str(tmp),
        accounting_backend=backend,
        phase_marks=marks,
    )
    total = time.monotonic_ns() - start
    if not isinstance(outcome, FixedDatasetResult):
        raise SystemExit(f"attempt failed: {outcome.code}: {outcome.message}")
    return outcome.timed_wall_time_ns, total


def median_difference_ci(on: list[int], off: list[int]) -> tuple[float, float, float]:
    """median(on) - median(off) and its bootstrap 95% CI (ns)."""
    rng = np.random.default_rng(16)
    a, b = np.array(on, dtype=float), np.array(off, dtype=float)
    picks_a = rng.integers(0, len(a), (RESAMPLES, len(a)))
    picks_b = rng.integers(0, len(b), (RESAMPLES, len(b)))
    diffs = np.median(a[picks_a], axis=1) - np.median(b[picks_b], axis=1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(np.median(a) - np.median(b)), float(low), float(high)


def paired_difference_ci(on: list[int], off: list[int]) -> tuple[float, float, float]:
    """The median of on_i - off_i over the ABBA pairs (neighbours in time share the host's
    load) and its bootstrap 95% CI (ns)."""
    rng = np.random.default_rng(16)
    diffs = np.array(on, dtype=float) - np.array(off, dtype=float)
    picks = rng.integers(0, len(diffs), (RESAMPLES, len(diffs)))
    low, high = np.percentile(np.median(diffs[picks], axis=1), [2.5, 97.5])
    return float(np.median(diffs)), float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=40, help="per arm (on, off)")
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mw-marks-"))
    log = ReadLog()
    log.install()
    try:
        attempt(tmp, args.backend, True)  # warm-up: imports, page cache
        log.clear()
        arms: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
        for index in range(args.attempts):
            for marks in (True, False) if index % 2 == 0 else (False, True):  # ABBA
                arms[marks].append(attempt(tmp, args.backend, marks))
        report(args, log, arms)
    finally:
        log.uninstall()
        shutil.rmtree(tmp, ignore_errors=True)


def report(args: argparse.Namespace, log: ReadLog, arms: dict[bool, list[tuple[int, int]]]) -> None:
    reads = len(log.walls_ns) / args.attempts
    read_us = statistics.median(log.walls_ns) / 1e3
    print(f"backend {args.backend}, {args.attempts} attempts per arm, no-op Python SDK worker")
    print(
        f"reads per attempt (counted): {reads:.1f}; one read in the attempts: median "
        f"{read_us:.1f} µs; reads x read cost: {reads * read_us / 1e3:.3f} ms per attempt, "
        f"{READS_IN_ENVELOPE} in the timed envelope: {READS_IN_ENVELOPE * read_us:.1f} µs; "
        f"decoding after the envelope: {statistics.median(log.decode_ns) / 1e3:.1f} µs per read"
    )
    off_wall = statistics.median(a[0] for a in arms[False])
    spent = np.array(log.in_envelope_ns, dtype=float)
    rng = np.random.default_rng(16)
    picks = rng.integers(0, len(spent), (RESAMPLES, len(spent)))
    low, high = np.percentile(np.median(spent[picks], axis=1), [2.5, 97.5])
    median = float(np.median(spent))
    print(
        f"marks inside the envelope, timed per attempt: median {median / 1e3:.1f} µs "
        f"[95% CI {low / 1e3:.1f}, {high / 1e3:.1f}], p90 {np.percentile(spent, 90) / 1e3:.1f} "
        f"µs = {median / off_wall * 100:.3f}% [{low / off_wall * 100:.3f}, "
        f"{high / off_wall * 100:.3f}] of the median timed wall with marks off"
    )
    for label, index in (("timed_wall", 0), ("whole attempt", 1)):
        on = [a[index] for a in arms[True]]
        off = [a[index] for a in arms[False]]
        base = statistics.median(off)
        print(
            f"{label:14s} median on {statistics.median(on) / 1e6:8.3f} ms, off {base / 1e6:8.3f} ms"
        )
        for how, (delta, low, high) in (
            ("Δ of medians", median_difference_ci(on, off)),
            ("paired Δ", paired_difference_ci(on, off)),
        ):
            print(
                f"{'':14s} {how:13s} {delta / 1e3:+8.1f} µs [95% CI {low / 1e3:+.1f}, "
                f"{high / 1e3:+.1f}] = {delta / base * 100:+.2f}% of off"
            )


if __name__ == "__main__":
    main()
