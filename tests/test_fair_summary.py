"""resource_summary.json and resource-card.md from synthetic profiled runs."""

from __future__ import annotations

import pytest

from fair_helpers import validate
from fair_runs import baseline_pair, cold_start_rows, manifest, rows
from metewand import canonical
from metewand.compare import resource_card
from metewand.compare.calibration import calibrate
from metewand.compare.resource_summary import summarize
from metewand.measure.host_gate import evaluate_gate

CLEAN_HOST = {
    "polluted": False,
    "flags": [],
    "sample_count": 12,
    "gate": {"passed": True, "triggered": [], "thresholds": {}, "unevaluated": []},
}


def _summary(profiled: list | None = None, **kwargs: object) -> dict:
    man, rs = manifest(), profiled if profiled is not None else rows()
    man_a, rows_a = baseline_pair()
    cal = calibrate(man_a, rows_a, man, rs)
    args = {"reference_engine": "chrome", "resamples": 300, "bootstrap_seed": 9, **kwargs}
    return summarize(man, rs, CLEAN_HOST, cal, cold_start_rows(), **args)  # type: ignore[arg-type]


def test_summary_validates_and_is_eligible() -> None:
    summary = _summary()
    validate("abb_resource_summary/1", summary)
    assert summary["resource_comparison_eligible"] is True
    assert summary["all_pass_intersection"]["attempts"] == 30
    stats = summary["comparison_contract"]["statistics"]["median_ci95"]
    assert stats["resamples"] == 300 and stats["seed"] == 9 and stats["cluster"] == "task_id"
    cpu = summary["by_engine"]["chrome"]["metrics"]["cpu_total_ms"]
    assert cpu["n"] == 30 and cpu["clusters"] == 6 and cpu["missing"] == 0
    assert cpu["median_ci95"][0] <= cpu["median"] <= cpu["median_ci95"][1]
    # canonical JSON on disk, byte-stable for the same inputs
    assert canonical.dumps(summary) == canonical.dumps(_summary())


def test_only_the_intersection_is_aggregated() -> None:
    profiled = rows(statuses={("task_005", "lightpanda", 0): "fail"})
    for row in profiled:
        if row["task_id"] == "task_005" and row["attempt"] == 0 and row["engine"] == "chrome":
            row["resource"]["cpu_total_ms"] = {"status": "complete", "value": 10**9}
    summary = _summary(profiled)
    chrome_cpu = summary["by_engine"]["chrome"]["metrics"]["cpu_total_ms"]
    assert chrome_cpu["n"] == 29 and chrome_cpu["p95"] < 10**6
    assert summary["excluded"]["status_by_engine"] == {
        "chrome": {"pass": 1},
        "lightpanda": {"fail": 1},
    }
    assert summary["functional_outcomes"]["lightpanda"]["pass"] == 29


def test_paired_ratio_leak_slope_and_cold_start() -> None:
    profiled = rows()
    for row in profiled:
        if row["engine"] == "chrome":
            value = 10**8 + 4096 * row["order"]["round"]  # leaks 4 KiB per task-attempt
            row["resource"]["pss_end_bytes"] = {"status": "complete", "value": value}
    summary = _summary(profiled)
    ratio = summary["paired_vs_reference"]["lightpanda"]["cpu_total_ms"]
    assert ratio["median_ratio"] == pytest.approx(0.1, rel=0.15)  # lightpanda is 10x cheaper
    assert ratio["median_ratio_ci95"][0] <= ratio["median_ratio"] <= ratio["median_ratio_ci95"][1]
    leak = summary["by_engine"]["chrome"]["leak_curve_fit"]["pss_end_bytes_slope_per_attempt"]
    assert leak["slope_per_attempt"] == pytest.approx(4096.0)
    # the peer's plain-number slope carries the same figure
    peer_curve = summary["by_engine"]["chrome"]["leak_curve"]
    assert peer_curve["pss_end_slope_bytes_per_attempt"] == pytest.approx(4096.0)
    cold = summary["cold_start"]
    assert cold["separate_from_warm_aggregation"] is True
    assert cold["by_engine"]["chrome"]["samples"] == 5
    assert cold["by_engine"]["chrome"]["metrics"]["ready_ms"]["median"] == 1002.0


def test_peak_misses_and_flags_are_counted() -> None:
    profiled = rows()
    for row in profiled[:4]:
        row["resource"]["quality_flags"] = ["peak_missed_by_sampler", "baseline_end_only"]
    summary = _summary(profiled)
    flags = summary["quality_flags_by_engine"]
    assert sum(f.get("peak_missed_by_sampler", 0) for f in flags.values()) == 4
    missed = sum(
        summary["by_engine"][e]["memory_high_water"]["peak_missed_by_sampler"]
        for e in ("chrome", "lightpanda")
    )
    assert missed == 4


def test_card_reads_like_a_report() -> None:
    summary = _summary()
    card = resource_card.render(summary)
    for heading in (
        "# Resource card: run_b",
        "## Eligibility",
        "## All-pass intersection, per engine",
        "## Paired ratios against chrome",
        "## Cold start (separate from warm attempts)",
        "## Excluded outcomes",
        "## Measurement quality flags",
        "## Host and observer quality",
    ):
        assert heading in card
    assert "30 task-attempts over 6 tasks" in card
    assert "**eligible**" in card
    assert card.count("| pass |") == 7


def test_card_explains_setup_flags_and_exclusions() -> None:
    profiled = rows()
    profiled[0]["resource"]["quality_flags"] = ["baseline_end_only"]
    profiled[1]["status"] = "fail"
    summary = _summary(profiled)
    card = resource_card.render(summary)
    assert "## Measurement setup and observer cost" in card
    assert "sampler CPU ms per attempt (median)" in card
    assert "- `baseline_end_only`: only the baseline and end PSS scans exist" in card
    assert "1 task-attempt(s) are outside the intersection" in card
    assert "limits: median duration" in card


def test_card_of_an_ineligible_run_without_host_or_baseline() -> None:
    man = manifest(k=3)
    summary = summarize(man, rows(k=3), None, None, (), resamples=50)
    validate("abb_resource_summary/1", summary)
    card = resource_card.render(summary)
    # a reason is table text: "k>=5" is written as Markdown shows it literally (k&gt;=5)
    assert "**not eligible**" in card and "k=3, needs k&gt;=5" in card
    assert "Host telemetry: unavailable" in card
    assert "Observer effect: unavailable" in card
    assert card.count("**FAIL**") == 3  # profile_jobs_k, host_gate, calibration


def test_gate_verdict_accepts_a_real_summary_shape() -> None:
    verdict = evaluate_gate([])
    summary = summarize(manifest(), rows(), {"gate": verdict}, None, (), resamples=20)
    host = next(c for c in summary["eligibility_conditions"] if c["id"] == "host_gate")
    assert not host["passed"] and "host_telemetry_missing" in host["reason"]
