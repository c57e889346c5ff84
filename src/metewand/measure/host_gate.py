"""The host pollution gate: did something outside the benchmark disturb the machine?

The gate reads ``abb_host_telemetry/1`` samples and returns a verdict (pass/fail, the triggered
conditions with their figures, and conditions it could not evaluate, with the reason). The
thresholds are a record recorded in the verdict, so a reader can see what "polluted" meant.
The verdict is comparability evidence only; it never rewrites a functional result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from metewand.measure.order_stats import middle

Sample = dict[str, Any]


# NamedTuples, not dataclasses: this module is on measure's start-up path (see
# measure.accounting); the thresholds' checks are in GateThresholds.__new__.
class _Thresholds(NamedTuple):
    max_swap_pages: int = 0  # pages swapped in+out during the run above this → swap_activity
    min_available_ratio: float = 0.05  # MemAvailable/MemTotal below this → low_memory_available
    cpu_some_avg10_max: float = 50.0  # % of time some runnable task waited for a CPU
    memory_full_avg10_max: float = 10.0  # % of time all non-idle tasks stalled on memory
    io_full_avg10_max: float = 20.0  # % of time all non-idle tasks stalled on IO
    sustained_samples: int = 3
    process_growth_min: int = 8  # allowed last-minus-first descendant growth ...
    process_growth_fraction: float = 0.2  # ... or this fraction of the first count, if larger
    # CPU cores spent beside the benchmark (machine minus benchmark, from /proc) above this for
    # ``sustained_samples`` consecutive samples → foreign_cpu_load. 0.10 cores is a tenth of a
    # core: another tenant compiling, a browser in the next session, a runaway cron job.
    foreign_cpu_max_cores: float = 0.10


class GateThresholds(_Thresholds):
    """What counts as pollution. Defaults follow the peer benchmark where it was sound.

    PSI conditions must hold for ``sustained_samples`` consecutive samples: one busy moment
    (a compile next door for two seconds) is not a polluted run, a sustained one is.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> GateThresholds:
        self = super().__new__(cls, *args, **kwargs)
        if self.sustained_samples < 1:
            raise ValueError("sustained_samples must be >= 1")
        if not self.foreign_cpu_max_cores >= 0:
            raise ValueError("foreign_cpu_max_cores must be >= 0")
        return self


class Outcome(NamedTuple):
    triggered: bool | None  # None: not evaluable (the reason is in ``detail``)
    detail: str
    figures: dict[str, Any]


class GateCondition(NamedTuple):
    name: str
    evaluate: Callable[[Sequence[Sample], GateThresholds], Outcome]


def _present(samples: Sequence[Sample], field: str) -> list[Sample]:
    return [s for s in samples if s.get(field) is not None]


def _swap_activity(samples: Sequence[Sample], th: GateThresholds) -> Outcome:
    readable = _present(samples, "vmstat")
    if len(readable) < 2:
        return Outcome(None, "fewer than two readable /proc/vmstat samples", {})
    first, last = readable[0]["vmstat"], readable[-1]["vmstat"]
    swapped_in = last["pswpin_pages"] - first["pswpin_pages"]
    swapped_out = last["pswpout_pages"] - first["pswpout_pages"]
    figures = {"pswpin_delta_pages": swapped_in, "pswpout_delta_pages": swapped_out}
    total = swapped_in + swapped_out
    detail = f"{total} pages swapped in/out during the run (allowed {th.max_swap_pages})"
    return Outcome(total > th.max_swap_pages, detail, figures)


def _low_memory(samples: Sequence[Sample], th: GateThresholds) -> Outcome:
    readable = _present(samples, "memory")
    if not readable:
        return Outcome(None, "no readable /proc/meminfo sample", {})
    ratios = [s["memory"]["available_bytes"] / s["memory"]["total_bytes"] for s in readable]
    low = min(ratios)
    detail = f"minimum MemAvailable/MemTotal {low:.4f} (threshold {th.min_available_ratio})"
    figures = {"min_available_ratio": round(low, 6)}
    return Outcome(low < th.min_available_ratio, detail, figures)


def _longest_run(flags: Sequence[bool]) -> int:
    best = run = 0
    for flag in flags:
        run = run + 1 if flag else 0
        best = max(best, run)
    return best


def _sustained_psi(resource: str, line: str, threshold_field: str) -> GateCondition:
    def evaluate(samples: Sequence[Sample], th: GateThresholds) -> Outcome:
        values = [
            s["psi"][resource][line]["avg10"]
            for s in samples
            if (s.get("psi") or {}).get(resource) and line in s["psi"][resource]
        ]
        if not values:
            reason = _first_unavailable(samples, f"psi.{resource}")
            return Outcome(None, f"PSI {resource} {line} unavailable: {reason}", {})
        limit = getattr(th, threshold_field)
        run = _longest_run([v >= limit for v in values])
        figures = {f"max_{line}_avg10": max(values), "longest_run_samples": run}
        detail = (
            f"{resource} {line} avg10 >= {limit} for {run} consecutive samples "
            f"(sustained means >= {th.sustained_samples}); max {max(values)}"
        )
        return Outcome(run >= th.sustained_samples, detail, figures)

    return GateCondition(f"sustained_{resource}_pressure", evaluate)


def _first_unavailable(samples: Sequence[Sample], field: str) -> str:
    for s in samples:
        entry = (s.get("unavailable") or {}).get(field)
        if entry:
            return f"{entry['reason']} ({entry.get('detail', '')})"
    return "no samples carry it"


def _process_growth(samples: Sequence[Sample], th: GateThresholds) -> Outcome:
    counts = [
        s["bench_descendant_process_count"]
        for s in samples
        if s.get("bench_descendant_process_count") is not None
    ]
    if len(counts) < 2:
        return Outcome(None, "fewer than two descendant-process counts", {})
    growth = counts[-1] - counts[0]
    allowed = max(th.process_growth_min, math.ceil(max(1, counts[0]) * th.process_growth_fraction))
    figures = {"first": counts[0], "last": counts[-1], "max": max(counts), "allowed": allowed}
    detail = f"benchmark descendants grew {counts[0]} -> {counts[-1]} (allowed +{allowed})"
    return Outcome(growth > allowed, detail, figures)


def foreign_cpu_outcome(samples: Sequence[Sample], th: GateThresholds) -> Outcome:
    """Sustained foreign CPU: more than the threshold for ``sustained_samples`` samples in a
    row; the figures name the foreign processes that used most in the samples over it."""
    figured = [s for s in samples if s.get("foreign_cpu")]
    if not figured:
        reason = _first_unavailable(samples[1:], "foreign_cpu")
        return Outcome(None, f"foreign CPU unavailable: {reason}", {})
    values = [s["foreign_cpu"]["foreign_cpu_cores"] for s in figured]
    limit = th.foreign_cpu_max_cores
    over = [v > limit for v in values]
    run = _longest_run(over)
    busy = [s for s, flag in zip(figured, over, strict=True) if flag]
    top = top_foreign_over(busy)
    figures = {
        "threshold_cores": limit,
        "max_cores": max(values),
        "median_cores": round(middle(values), 4),
        "samples_over": len(busy),
        "longest_run_samples": run,
        "top_foreign": top,
    }
    named = ", ".join(f"{t['comm']}[{t['pid']}] {t['cpu_cores_mean']:.2f}" for t in top[:3])
    detail = (
        f"foreign CPU > {limit} cores for {run} consecutive samples (sustained means >= "
        f"{th.sustained_samples}); max {max(values):.2f} cores"
        + (f"; top foreign while over: {named}" if named else "")
    )
    return Outcome(run >= th.sustained_samples, detail, figures)


def top_foreign_over(samples: Sequence[Sample], top_n: int = 8) -> list[dict[str, Any]]:
    """The foreign processes that used most CPU across ``samples``: mean cores over those
    samples (absent from a sample's top list counts as 0 there) and how many lists named it."""
    totals: dict[tuple[int, str], float] = {}
    seen: dict[tuple[int, str], int] = {}
    counted = [s for s in samples if s.get("foreign_cpu")]
    for s in counted:
        for entry in s["foreign_cpu"].get("top_foreign", []):
            key = (entry["pid"], entry["comm"])
            totals[key] = totals.get(key, 0.0) + entry["cpu_cores"]
            seen[key] = seen.get(key, 0) + 1
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:top_n]
    return [
        {
            "pid": pid,
            "comm": comm,
            "cpu_cores_mean": round(total / len(counted), 4),
            "samples_named": seen[(pid, comm)],
        }
        for (pid, comm), total in ranked
    ]


CONDITIONS: tuple[GateCondition, ...] = (
    GateCondition("swap_activity", _swap_activity),
    GateCondition("low_memory_available", _low_memory),
    _sustained_psi("cpu", "some", "cpu_some_avg10_max"),
    _sustained_psi("memory", "full", "memory_full_avg10_max"),
    _sustained_psi("io", "full", "io_full_avg10_max"),
    GateCondition("abnormal_process_growth", _process_growth),
    GateCondition("foreign_cpu_load", foreign_cpu_outcome),
)


def evaluate_gate(
    samples: Sequence[Sample],
    thresholds: GateThresholds | None = None,
    sampler_errors: Sequence[str] = (),
) -> dict[str, Any]:
    """Verdict: ``passed``, ``triggered`` [{condition, detail, figures}], ``unevaluated``.

    No samples at all, or a failing sampler, fails the gate: a run whose host nobody watched
    cannot be vouched for.
    """
    th = thresholds or GateThresholds()
    triggered: list[dict[str, Any]] = []
    unevaluated: list[dict[str, str]] = []
    evaluated: list[str] = []
    if not samples:
        triggered.append(_entry("host_telemetry_missing", "no host telemetry samples", {}))
    if sampler_errors:
        detail = f"{len(sampler_errors)} sampler error(s); first: {sampler_errors[0]}"
        triggered.append(_entry("host_telemetry_sampler_failed", detail, {}))
    for condition in CONDITIONS if samples else ():
        outcome = condition.evaluate(samples, th)
        if outcome.triggered is None:
            unevaluated.append({"condition": condition.name, "reason": outcome.detail})
            continue
        evaluated.append(condition.name)
        if outcome.triggered:
            triggered.append(_entry(condition.name, outcome.detail, outcome.figures))
    return {
        "passed": not triggered,
        "triggered": triggered,
        "evaluated": evaluated,
        "unevaluated": unevaluated,
        "thresholds": th._asdict(),
        "sample_count": len(samples),
    }


def _entry(name: str, detail: str, figures: dict[str, Any]) -> dict[str, Any]:
    return {"condition": name, "detail": detail, "figures": figures}
