"""Acceptance 3 and 4 on real Chrome: a short memory spike the PSS samples miss is caught by the
cgroup high-water and flagged; a sampler fault mid-attempt changes no status and is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_acceptance_helpers import rows_of, run
from metewand.runtime.schemas import violations
from metewand.suites.browser.profiler import SAMPLER_FAULT_ENV

MIB = 1 << 20
# these tests read the profiled attempts' samples: no interleaved calibration twins (the default
# for a profiled run) to double the attempts
SEPARATE = "separate"


def test_spike_between_samples_is_caught_by_the_cgroup_high_water(tmp_path: Path) -> None:
    # 5 s between ticks: the spike (~300 MiB for ~40 ms) falls between the baseline and end scans
    run_dir = run(
        tmp_path,
        "spike",
        engines=("chrome",),
        k=2,
        tasks=("own_memory_spike",),
        interval_ms=5000,
        calibration=SEPARATE,
    )
    for row in rows_of(run_dir):
        assert row["status"] == "pass", row.get("reason")
        res = row["resource_forms"]
        assert violations("metewand_engine_resources-1", res) == []
        assert violations("abb_engine_resources-1", row["resource"]) == []
        assert res["sample_counts"]["ticks"] == 0 and res["cgroup_memory_peak_window"] == "attempt"
        pss_rise = res["pss_peak_bytes"]["value"] - res["pss_baseline_bytes"]["value"]
        # The kernel's rise over the charge at the baseline scan (the end scan sees the live
        # tab, so PSS and the cgroup charge are compared as rises, not as levels)
        resource_file = next(a for a in row["artifacts"] if a.endswith("/resource.jsonl"))
        baseline = json.loads((run_dir / resource_file).read_text().splitlines()[0])
        assert baseline["kind"] == "engine_sample" and baseline["phase"] == "baseline"
        charge_at_baseline = baseline["cgroup_memory_current_bytes"]
        kernel_rise = res["cgroup_memory_peak_bytes"]["value"] - charge_at_baseline
        assert kernel_rise > 250 * MIB, "the kernel high-water holds the ~300 MiB spike"
        # The samples miss a large part of it. Not all: the end scan sees the live tab (~55 MiB)
        # and pages of the dropped buffer that Chrome's allocator has not returned yet, even after
        # the task's collectGarbage (up to ~120 MiB of rise seen, and once, in ci163, ~190 MiB:
        # a PSS rise of 242 MiB against the kernel's 374)
        assert kernel_rise - pss_rise > 100 * MIB, "the PSS samples were meant to miss the spike"
        assert "peak_missed_by_sampler" in res["quality_flags"]


def test_quiet_attempt_is_not_flagged_as_a_missed_peak(tmp_path: Path) -> None:
    run_dir = run(
        tmp_path, "quiet", engines=("chrome",), k=2, interval_ms=5000, calibration=SEPARATE
    )
    for row in rows_of(run_dir):
        assert "peak_missed_by_sampler" not in row["resource_forms"]["quality_flags"]


def test_sampler_fault_mid_attempt_is_a_flag_not_a_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = ("own_slow_page",)  # a page served after 300 ms: ticks at 50 ms land inside it
    clean = run(
        tmp_path,
        "clean",
        engines=("chrome",),
        k=1,
        tasks=task,
        interval_ms=50,
        calibration=SEPARATE,
    )
    monkeypatch.setenv(SAMPLER_FAULT_ENV, "2")
    faulty = run(
        tmp_path,
        "faulty",
        engines=("chrome",),
        k=1,
        tasks=task,
        interval_ms=50,
        calibration=SEPARATE,
    )
    clean_rows, faulty_rows = rows_of(clean), rows_of(faulty)
    assert [r["status"] for r in faulty_rows] == [r["status"] for r in clean_rows] == ["pass"]
    assert [r["failure_class"] for r in faulty_rows] == [r["failure_class"] for r in clean_rows]
    res = faulty_rows[0]["resource_forms"]
    assert violations("metewand_engine_resources-1", res) == []
    peer = faulty_rows[0]["resource"]
    assert violations("abb_engine_resources-1", peer) == []
    assert peer["pss_end_bytes"] is None and "pss_end_bytes" in peer["unavailable"]
    assert "sampler_fault" in res["quality_flags"]
    assert "injected sampler fault at tick 2" in res["fault"]
    assert res["pss_end_bytes"]["status"] == "unavailable"  # never a fabricated end value
    assert "sampler_fault" not in clean_rows[0]["resource_forms"]["quality_flags"]
