"""Build the per-attempt ``abb_engine_resources/1`` record (``results.jsonl[].resource``).

The runner calls ``engine_resources_record`` after ``Sampler.stop()``: measured values stay
measurement forms (CPU converted from ns to whole ms, keeping status and reason), derived
``avg_cores`` is a number or null, and the kernel's memory high-water is compared with what the
sampler saw, so a spike between samples is flagged ``peak_missed_by_sampler`` instead of being
silently lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metewand.measure.accounting import CpuReading
from metewand.measure.forms import Measurement, QualityFlag, Reason, Status, unavailable
from metewand.measure.sampler import SamplerSummary

RESOURCES_SCHEMA = "abb_engine_resources/1"
NS_PER_MS = 1_000_000
# the kernel high-water must exceed the largest sampled cgroup memory.current by both margins
PEAK_MISS_RATIO = 0.10
PEAK_MISS_MIN_BYTES = 8 << 20
# the kernel's rise over the baseline charge must exceed the sampled PSS rise by both margins
PEAK_MISS_RISE_MIN_BYTES = 64 << 20
PEAK_MISS_RISE_RATIO = 0.25


def ns_to_ms(m: Measurement) -> Measurement:
    """Same form, value in whole milliseconds (rounded half up)."""
    if m.value is None:
        return m
    return Measurement(m.status, (m.value + NS_PER_MS // 2) // NS_PER_MS, m.reason, m.source)


def peak_delta(baseline: Measurement, peak: Measurement) -> Measurement:
    if baseline.value is None:
        return baseline
    if peak.value is None:
        return peak
    status = Status.PARTIAL if Status.PARTIAL in (baseline.status, peak.status) else Status.COMPLETE
    reason = peak.reason or baseline.reason if status is Status.PARTIAL else None
    return Measurement(status, max(0, peak.value - baseline.value), reason, peak.source)


def avg_cores(cpu_ms: Measurement, duration_ms: float | None) -> float | None:
    if cpu_ms.value is None or not duration_ms or duration_ms <= 0:
        return None
    return round(cpu_ms.value / duration_ms, 4)


def sampled_memory_max(samples: Sequence[Mapping[str, Any]]) -> int | None:
    values = [
        s["memory_current_bytes"].get("value")
        for s in samples
        if isinstance(s.get("memory_current_bytes"), Mapping)
    ]
    present = [v for v in values if isinstance(v, int)]
    return max(present) if present else None


def _baseline_charge(samples: Sequence[Mapping[str, Any]]) -> int | None:
    first = samples[0].get("memory_current_bytes") if samples else None
    value = first.get("value") if isinstance(first, Mapping) else None
    return value if isinstance(value, int) else None


def peak_missed(
    kernel_peak: Measurement,
    samples: Sequence[Mapping[str, Any]],
    pss_baseline: Measurement | None = None,
    pss_peak: Measurement | None = None,
) -> bool:
    """True when the cgroup saw a high-water the sampler's readings clearly do not show.

    Two ways to miss: the kernel peak is clearly above every sampled cgroup charge; or the tree's
    rise the kernel saw (peak minus the charge at the baseline scan) is far above the rise the PSS
    samples saw. The second catches a spike whose charge lingers at the end scan (an exiting
    renderer is still charged while its PSS is already 0). Its margin is wide because charge and
    PSS differ by design: each new Chrome renderer adds ~10-40 MiB of charge PSS may not show.
    """
    if kernel_peak.value is None:
        return False
    seen = sampled_memory_max(samples)
    if seen is not None:
        excess = kernel_peak.value - seen
        if excess > PEAK_MISS_MIN_BYTES and excess > seen * PEAK_MISS_RATIO:
            return True
    charge0 = _baseline_charge(samples)
    if charge0 is None or pss_baseline is None or pss_peak is None:
        return False
    if pss_baseline.value is None or pss_peak.value is None:
        return False
    unseen = (kernel_peak.value - charge0) - (pss_peak.value - pss_baseline.value)
    return unseen > max(PEAK_MISS_RISE_MIN_BYTES, PEAK_MISS_RISE_RATIO * pss_baseline.value)


def _delta(before: Measurement, after: Measurement) -> Measurement:
    if before.value is None:
        return before
    if after.value is None:
        return after
    partial_one = next((m for m in (after, before) if m.status is Status.PARTIAL), None)
    status = Status.PARTIAL if partial_one else Status.COMPLETE
    reason = partial_one.reason if partial_one else None
    return Measurement(status, max(0, after.value - before.value), reason, after.source)


def cpu_delta(before: CpuReading, after: CpuReading) -> CpuReading:
    """The attempt's CPU: the reading at the end scan minus the reading at the baseline scan."""
    return CpuReading(
        total=_delta(before.total, after.total),
        user=_delta(before.user, after.user),
        system=_delta(before.system, after.system),
    )


def _cpu_forms(cpu: CpuReading | None) -> dict[str, Measurement]:
    if cpu is None:
        gone = unavailable(Reason.NOT_STARTED)
        return {"cpu_total_ms": gone, "cpu_user_ms": gone, "cpu_system_ms": gone}
    return {
        "cpu_total_ms": ns_to_ms(cpu.total),
        "cpu_user_ms": ns_to_ms(cpu.user),
        "cpu_system_ms": ns_to_ms(cpu.system),
    }


def engine_resources_record(
    summary: SamplerSummary,
    attempt_cpu: CpuReading | None,
    *,
    backend: str,
    duration_ms: float | None,
    collection_wall_ms: float,
    fallback_reasons: Sequence[str] = (),
    engine: str | None = None,
    fixture_traffic: Mapping[str, Any] | None = None,
    memory_peak_per_attempt: bool = True,
    cpu_wall_ms: float | None = None,
) -> dict[str, Any]:
    """``attempt_cpu`` is the attempt's CPU (end reading minus baseline reading, in ns).
    ``cpu_wall_ms``: the wall that reading spans when it is not the collection wall (the end
    reading taken after the page's cleanup); ``avg_cores`` divides by it.

    ``memory_peak_per_attempt``: the cgroup high-water was restarted at the attempt's start; when
    it was not, it may hold an earlier attempt's peak, so it is not compared with the samples."""
    cpu = _cpu_forms(attempt_cpu)
    flags = [f.value for f in summary.quality_flags]
    if (
        memory_peak_per_attempt
        and peak_missed(
            summary.cgroup_memory_peak, summary.samples, summary.pss_baseline, summary.pss_peak
        )
        and (QualityFlag.PEAK_MISSED_BY_SAMPLER.value not in flags)
    ):
        flags.append(QualityFlag.PEAK_MISSED_BY_SAMPLER.value)
    forms: dict[str, Measurement] = {
        **cpu,
        "pss_baseline_bytes": summary.pss_baseline,
        "pss_peak_bytes": summary.pss_peak,
        "pss_end_bytes": summary.pss_end,
        "pss_peak_delta_bytes": peak_delta(summary.pss_baseline, summary.pss_peak),
        "process_count_baseline": summary.process_count_baseline,
        "process_count_peak": summary.process_count_peak,
        "process_count_end": summary.process_count_end,
        "cgroup_memory_current_bytes": summary.cgroup_memory_current,
        "cgroup_memory_peak_bytes": summary.cgroup_memory_peak,
    }
    record: dict[str, Any] = {name: m.to_json() for name, m in forms.items()}
    record.update(
        schema=RESOURCES_SCHEMA,
        scope="engine_scope",
        backend=backend,
        fallback_reasons=list(fallback_reasons),
        measurement_backend={
            "cpu": cpu["cpu_total_ms"].source or backend,
            "memory_pss": "proc_smaps_rollup",
            "memory_accounting": summary.cgroup_memory_peak.source or "unavailable",
        },
        interval_ms=summary.interval_ms,
        avg_cores=avg_cores(
            cpu["cpu_total_ms"], collection_wall_ms if cpu_wall_ms is None else cpu_wall_ms
        ),
        sample_counts={
            "ticks": summary.tick_count,
            "pss_samples": summary.pss_sample_count,
            "pss_every": summary.pss_every,
        },
        sampler_cpu_ms=round(summary.sampler_cpu_ns / NS_PER_MS, 3),
        quality_flags=flags,
        collection_wall_ms=round(collection_wall_ms, 3),
        fault=summary.fault,
        cgroup_memory_peak_window="attempt" if memory_peak_per_attempt else "group_lifetime",
    )
    if duration_ms is not None:
        record["duration_ms"] = duration_ms
    if engine is not None:
        record["engine"] = engine
    if fixture_traffic is not None:
        record["fixture_traffic"] = dict(fixture_traffic)
    return record
