"""Build the per-attempt resource records.

The runner calls ``engine_resources_record`` after ``Sampler.stop()``. That is metewand's own
record (``results.jsonl[].resource_forms``, schema ``metewand_engine_resources/1``): measured
values stay measurement forms (CPU in ms with microsecond precision, keeping status and reason),
derived ``avg_cores`` is a number or null, and the kernel's memory high-water is compared with
what the sampler saw, so a spike between samples is flagged ``peak_missed_by_sampler`` instead of
being silently lost.

``peer_resources_record`` renders it in the peer benchmark's ``abb_engine_resources/1`` layout
(``results.jsonl[].resource``): plain numbers, null where nothing was measured, and the reason
for each null in an ``unavailable`` map. ``peer_sample_line`` does the same for a line of the
per-attempt ``resource.jsonl``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metewand.measure.accounting import CpuReading
from metewand.measure.forms import Measurement, QualityFlag, Reason, Status, unavailable
from metewand.measure.sampler import SamplerSummary

RESOURCES_SCHEMA = "abb_engine_resources/1"  # the peer's layout (plain numbers)
FORMS_SCHEMA = "metewand_engine_resources/1"  # ours (measurement forms)
NS_PER_MS = 1_000_000
CPU_FIELDS = ("cpu_total_ms", "cpu_user_ms", "cpu_system_ms")
# What seed 002 asks a report and each row to say about byte counts metewand does not take.
CONTROL_PLANE_NOT_IMPLEMENTED = {
    "available": False,
    "reason": "not implemented: metewand does not count CDP WebSocket (control-plane) bytes",
}
WIRE_NOT_IMPLEMENTED = {
    "available": False,
    "reason": "not implemented: metewand has no packet-level (wire-byte) backend; "
    "fixture_traffic counts application headers and bodies only",
}
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


def ns_form_as_ms(m: Measurement) -> dict[str, Any]:
    """The wire form of a nanosecond reading with its value in ms to the microsecond: a
    Lightpanda attempt takes ~7 ms of CPU, so whole-ms rounding would cost up to 7%."""
    out = m.to_json()
    if m.value is not None:
        out["value"] = ns_to_ms_float(m.value)
    return out


def ns_to_ms_float(ns: int) -> float:
    return round(ns / NS_PER_MS, 3)


def peak_delta(baseline: Measurement, peak: Measurement) -> Measurement:
    if baseline.value is None:
        return baseline
    if peak.value is None:
        return peak
    status = Status.PARTIAL if Status.PARTIAL in (baseline.status, peak.status) else Status.COMPLETE
    reason = peak.reason or baseline.reason if status is Status.PARTIAL else None
    return Measurement(status, max(0, peak.value - baseline.value), reason, peak.source)


def avg_cores(cpu_ns: Measurement, duration_ms: float | None) -> float | None:
    if cpu_ns.value is None or not duration_ms or duration_ms <= 0:
        return None
    return round(cpu_ns.value / NS_PER_MS / duration_ms, 4)


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
    # values stay in ns here; the record renders them in ms to the microsecond
    return {"cpu_total_ms": cpu.total, "cpu_user_ms": cpu.user, "cpu_system_ms": cpu.system}


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
    record: dict[str, Any] = {
        name: ns_form_as_ms(m) if name in CPU_FIELDS else m.to_json() for name, m in forms.items()
    }
    baseline_charge = _baseline_charge(summary.samples)
    record.update(
        cgroup_memory_baseline_bytes=baseline_charge,
        schema=FORMS_SCHEMA,
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


# the peer's plain-number fields, each read from the form of the same name in our record
PEER_FORM_FIELDS = (
    *CPU_FIELDS,
    "pss_baseline_bytes",
    "pss_peak_bytes",
    "pss_end_bytes",
    "pss_peak_delta_bytes",
    "process_count_baseline",
    "process_count_peak",
    "process_count_end",
    "cgroup_memory_peak_bytes",
)


def _plain(form: Any) -> tuple[int | float | None, str | None]:
    """(value, None) from a wire form that carries one, else (None, its reason)."""
    if isinstance(form, Mapping):
        value = form.get("value")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value, None
        return None, str(form.get("reason") or form.get("status") or "unavailable")
    if isinstance(form, int | float) and not isinstance(form, bool):
        return form, None
    return None, "not measured"


def peer_resources_record(ours: Mapping[str, Any]) -> dict[str, Any]:
    """Our forms record in the peer's ``abb_engine_resources/1`` layout: plain numbers, null
    where nothing was measured, the reason for each null in ``unavailable``."""
    out: dict[str, Any] = {"schema": RESOURCES_SCHEMA, "scope": "engine_scope"}
    unavailable_map: dict[str, str] = {}
    for name in PEER_FORM_FIELDS:
        value, reason = _plain(ours.get(name))
        out[name] = value
        if reason is not None:
            unavailable_map[name] = reason
    baseline = ours.get("cgroup_memory_baseline_bytes")
    end, _ = _plain(ours.get("cgroup_memory_current_bytes"))
    peak = out["cgroup_memory_peak_bytes"]
    out["cgroup_memory_baseline_bytes"] = baseline if isinstance(baseline, int) else None
    out["cgroup_memory_end_bytes"] = end
    out["cgroup_memory_peak_delta_bytes"] = (
        max(0, peak - baseline) if isinstance(peak, int) and isinstance(baseline, int) else None
    )
    for name in ("cgroup_memory_baseline_bytes", "cgroup_memory_end_bytes"):
        if out[name] is None:
            unavailable_map.setdefault(name, "memory accounting unavailable")
    if ours.get("cgroup_memory_peak_window") == "group_lifetime":
        # the high-water was not restarted for this attempt: it may hold an earlier peak
        unavailable_map["cgroup_memory_peak_delta_bytes"] = "memory.peak not reset per attempt"
        out["cgroup_memory_peak_delta_bytes"] = None
    raw_counts = ours.get("sample_counts")
    counts: Mapping[str, Any] = raw_counts if isinstance(raw_counts, Mapping) else {}
    fallback = [str(r) for r in ours.get("fallback_reasons") or []]
    out.update(
        avg_cores=ours.get("avg_cores"),
        collection_wall_ms=ours.get("collection_wall_ms"),
        sample_interval_ms=ours.get("interval_ms"),
        sampler_cpu_ms=ours.get("sampler_cpu_ms"),
        samples_seen=counts.get("pss_samples"),
        quality_flags=list(ours.get("quality_flags") or []),
        measurement_backend=dict(ours.get("measurement_backend") or {}),
        engine_cgroup_error="; ".join(fallback) or None,
        control_plane_traffic=dict(CONTROL_PLANE_NOT_IMPLEMENTED),
        wire_traffic=dict(WIRE_NOT_IMPLEMENTED),
        unavailable=unavailable_map,
    )
    if isinstance(ours.get("fixture_traffic"), Mapping):
        out["fixture_traffic"] = dict(ours["fixture_traffic"])
    if ours.get("fault"):
        out["fault"] = ours["fault"]
    return out


def peer_sample_line(sample: Mapping[str, Any], t0_monotonic_ns: int | None) -> dict[str, Any]:
    """One sampler reading as a peer ``resource.jsonl`` line (``kind: engine_sample``), plain
    numbers; our own reading stays beside it under ``metewand``."""
    kind = str(sample.get("kind", "sample"))
    t_ns = sample.get("t_ns")
    pss, _ = _plain(sample.get("pss_bytes"))
    memory, _ = _plain(sample.get("memory_current_bytes"))
    cpu_ns, _ = _plain(sample.get("cpu_time_ns"))
    return {
        "kind": "engine_sample",
        "phase": kind if kind in ("baseline", "end") else "sample",
        "elapsed_ms": round(t_ns / NS_PER_MS, 6) if isinstance(t_ns, int) else None,
        "monotonic_ns": (t0_monotonic_ns + t_ns)
        if isinstance(t_ns, int) and t0_monotonic_ns is not None
        else None,
        "process_count": sample.get("process_count"),
        "pss_bytes": pss,
        "cgroup_memory_current_bytes": memory,
        "cgroup_memory_peak_bytes": None,  # the high-water is read once, at the end
        "cgroup_cpu": {"usage_usec": int(cpu_ns // 1000)} if isinstance(cpu_ns, int) else None,
        "metewand": dict(sample),
    }


def cold_start_record(
    summary: SamplerSummary,
    cpu: CpuReading,
    *,
    backend: str,
    fallback_reasons: Sequence[str],
    engine: str,
    ready_ms: float | None,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """One cold start (launch to CDP-ready, group created before exec) in the peer's layout:
    an ``abb_engine_resources/1`` record with ``phase: cold_start``, the ``launch_*`` fields and
    plain numbers; our forms ride along under ``metewand``."""
    ours = engine_resources_record(
        summary,
        cpu,
        backend=backend,
        duration_ms=ready_ms,
        collection_wall_ms=ready_ms or 0.0,
        fallback_reasons=fallback_reasons,
        engine=engine,
    )
    record = peer_resources_record(ours)
    for name in ("control_plane_traffic", "wire_traffic"):
        record.pop(name)  # no task traffic during a launch
    record.update(
        phase="cold_start",
        engine=engine,
        status="ready" if ready_ms is not None else "launch_failed",
        ready_ms=round(ready_ms, 3) if ready_ms is not None else None,
        launch_cpu_ms=record["cpu_total_ms"],
        launch_user_cpu_ms=record["cpu_user_ms"],
        launch_system_cpu_ms=record["cpu_system_ms"],
        launch_peak_pss_bytes=record["pss_peak_bytes"],
        process_count_at_ready=record["process_count_end"],
        backend=backend,
        metewand=ours,
        **extra,
    )
    return record
