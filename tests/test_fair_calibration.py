"""Profiler-off / profiler-on calibration on synthetic rows."""

from __future__ import annotations

import pytest

from fair_helpers import validate
from fair_runs import baseline_pair, manifest, rows
from metewand.compare.calibration import CalibrationThresholds, calibrate


def _checks(result: dict) -> dict[str, dict]:
    return {c["name"]: c for c in result["checks"]}


def test_matching_runs_are_acceptable_with_figures() -> None:
    man_a, rows_a = baseline_pair()
    result = calibrate(man_a, rows_a, manifest(), rows(wall_overhead=1.03))
    validate("metewand_calibration/1", result)
    assert result["acceptable"], result["failed_checks"]
    assert result["overall"]["pairs"] == 60
    # same rng seed → same durations: duration overhead 0, collection wall +3% by construction
    assert result["overall"]["median_duration_overhead_pct"] == pytest.approx(0.0, abs=1e-9)
    assert result["overall"]["median_collection_wall_overhead_pct"] == pytest.approx(3.0, abs=0.01)
    assert result["overall"]["collection_wall_from_duration"] == 0
    assert set(result["by_engine"]) == {"chrome", "lightpanda"}
    names = set(_checks(result))
    assert {"duration_overhead[chrome]", "collection_wall_overhead[lightpanda]"} <= names


def test_another_seed_is_named() -> None:
    man_a, rows_a = baseline_pair(seed="other-seed")
    result = calibrate(man_a, rows_a, manifest(), rows())
    check = _checks(result)["provenance_identical"]
    assert not result["acceptable"] and not check["passed"]
    assert check["figures"]["differing"] == ["seed"]
    assert "seed" in check["reason"]


def test_every_differing_fact_is_named() -> None:
    man_a, rows_a = baseline_pair(jobs=2, host={"kernel": "other"}, harness_pins={"python": "3.12"})
    check = _checks(calibrate(man_a, rows_a, manifest(), rows()))["provenance_identical"]
    assert check["figures"]["differing"] == ["jobs", "harness_pins", "host"]


def test_unmatched_attempts_fail_pairing_in_both_directions() -> None:
    man_a, rows_a = baseline_pair()
    result = calibrate(man_a, rows_a[:-1], manifest(), rows())
    pairing = _checks(result)["fully_paired"]
    assert not pairing["passed"] and pairing["figures"]["only_in_profiled"] == 1
    result = calibrate(man_a, rows_a, manifest(), rows()[1:])
    assert _checks(result)["fully_paired"]["figures"]["only_in_baseline"] == 1


def test_status_mismatch_above_one_percent_fails() -> None:
    man_a, rows_a = baseline_pair()
    profiled = rows(statuses={("task_000", "chrome", 0): "fail"})  # 1 of 60 = 1.7%
    check = _checks(calibrate(man_a, rows_a, manifest(), profiled))["status_mismatch_rate"]
    assert not check["passed"] and check["figures"]["status_mismatches"] == 1
    lenient = CalibrationThresholds(max_status_mismatch_rate=0.02)
    check = _checks(calibrate(man_a, rows_a, manifest(), profiled, lenient))["status_mismatch_rate"]
    assert check["passed"]


def test_overhead_beyond_threshold_fails_overall_and_per_engine() -> None:
    man_a, rows_a = baseline_pair()
    result = calibrate(man_a, rows_a, manifest(), rows(slowdown=1.12, wall_overhead=1.15))
    validate("metewand_calibration/1", result)
    failed = set(result["failed_checks"])
    assert {"duration_overhead[overall]", "collection_wall_overhead[overall]"} <= failed
    assert {"duration_overhead[chrome]", "duration_overhead[lightpanda]"} <= failed
    tight = CalibrationThresholds.from_observer_effect_pct(2.0)
    result = calibrate(man_a, rows_a, manifest(), rows(wall_overhead=1.03), tight)
    assert result["failed_checks"] == [
        "collection_wall_overhead[overall]",
        "collection_wall_overhead[chrome]",
        "collection_wall_overhead[lightpanda]",
    ]


def test_one_engine_over_the_limit_is_caught_per_engine() -> None:
    man_a, rows_a = baseline_pair()
    profiled = rows()
    for row in profiled:
        if row["engine"] == "chrome" and row["attempt"] < 3:  # most chrome pairs +20%
            row["collection_wall_ms"] = row["collection_wall_ms"] * 1.2
    result = calibrate(man_a, rows_a, manifest(), profiled)
    assert "collection_wall_overhead[chrome]" in result["failed_checks"]
    assert "collection_wall_overhead[lightpanda]" not in result["failed_checks"]


def test_missing_collection_wall_falls_back_to_duration_and_is_counted() -> None:
    man_a, rows_a = baseline_pair()
    for row in rows_a:
        del row["collection_wall_ms"]
    result = calibrate(man_a, rows_a, manifest(), rows())
    assert result["overall"]["collection_wall_from_duration"] == 60
    profiled = rows()
    for row in profiled:
        del row["collection_wall_ms"]
        del row["resource"]["collection_wall_ms"]
    result = calibrate(man_a, rows_a, manifest(), profiled)
    check = _checks(result)["collection_wall_overhead[overall]"]
    assert not check["passed"] and "no collection_wall pair" in check["reason"]


def test_profile_modes_must_be_baseline_then_engine() -> None:
    result = calibrate(manifest("run_a"), rows(), manifest(), rows())
    check = _checks(result)["profile_modes"]
    assert not check["passed"] and "'engine'" in check["reason"]


def test_attempt_span_overhead_is_reported_and_never_gated() -> None:
    man_a, rows_a = baseline_pair()
    profiled = rows(wall_overhead=1.03)
    for row in rows_a:
        row["attempt_span_ms"] = row["collection_wall_ms"] + 300.0  # cleanup + settle
    for row in profiled:
        row["attempt_span_ms"] = (row["collection_wall_ms"] + 300.0) * 1.5
    result = calibrate(man_a, rows_a, manifest(), profiled)
    validate("metewand_calibration/1", result)
    assert result["overall"]["attempt_span_pairs"] == 60
    assert result["overall"]["median_attempt_span_overhead_pct"] > 49.0  # far over any limit
    assert result["acceptable"], result["failed_checks"]  # supplementary: no check reads it
    without = calibrate(man_a, baseline_pair()[1], manifest(), rows())
    assert without["overall"]["attempt_span_pairs"] == 0
    assert without["overall"]["median_attempt_span_overhead_pct"] is None
