"""The seven eligibility conditions, each failing on its own with the right reason."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import pytest

from fair_runs import baseline_pair, manifest, rows, traffic
from metewand.compare.calibration import calibrate
from metewand.compare.eligibility import CONDITIONS, evaluate
from metewand.compare.intersection import all_pass_intersection
from metewand.measure.host import HostTelemetry
from metewand.measure.host_gate import GateThresholds

CLEAN_HOST: dict[str, Any] = {"polluted": False, "gate": {"passed": True, "triggered": []}}


def _calibration(man_b: dict, rows_b: list, **baseline_overrides: Any) -> dict:
    man_a, rows_a = baseline_pair(**baseline_overrides)
    return calibrate(man_a, rows_a, man_b, rows_b)


def _failed(result: dict) -> dict[str, str]:
    return {c["id"]: c["reason"] for c in result["conditions"] if not c["passed"]}


def test_clean_ab_is_eligible_with_all_seven_listed() -> None:
    man, rs = manifest(), rows()
    result = evaluate(man, rs, CLEAN_HOST, _calibration(man, rs))
    assert result["resource_comparison_eligible"], _failed(result)
    assert [c["id"] for c in result["conditions"]] == [c.id for c in CONDITIONS]
    assert len(result["conditions"]) == 7 and all(c["reason"] for c in result["conditions"])
    assert result["ineligibility_reasons"] == []


def test_k3_fails_only_the_profile_condition() -> None:
    man, rs = manifest(k=3), rows(k=3)
    cal = calibrate(manifest("run_a", mode="baseline", k=3), rows(k=3, profiled=False), man, rs)
    failed = _failed(evaluate(man, rs, CLEAN_HOST, cal))
    assert list(failed) == ["profile_jobs_k"] and "k=3, needs k>=5" in failed["profile_jobs_k"]


def test_jobs2_fails_only_the_profile_condition() -> None:
    man, rs = manifest(jobs=2), rows()
    cal = calibrate(manifest("run_a", mode="baseline", jobs=2), rows(profiled=False), man, rs)
    failed = _failed(evaluate(man, rs, CLEAN_HOST, cal))
    assert list(failed) == ["profile_jobs_k"] and "jobs=2" in failed["profile_jobs_k"]


def test_one_engine_fails_the_engines_condition() -> None:
    man, rs = manifest(selected_engines=["chrome"]), rows(engines=("chrome",))
    base = manifest("run_a", mode="baseline", selected_engines=["chrome"])
    cal = calibrate(base, rows(engines=("chrome",), profiled=False), man, rs)
    failed = _failed(evaluate(man, rs, CLEAN_HOST, cal))
    assert list(failed) == ["engines"]
    assert "1 engine(s) selected" in failed["engines"]


def test_baseline_with_another_seed_fails_calibration() -> None:
    man, rs = manifest(), rows()
    failed = _failed(evaluate(man, rs, CLEAN_HOST, _calibration(man, rs, seed="other")))
    assert list(failed) == ["calibration"]
    assert "differ: seed" in failed["calibration"]


def test_missing_calibration_is_named() -> None:
    failed = _failed(evaluate(manifest(), rows(), CLEAN_HOST, None))
    assert failed == {"calibration": "profiler on/off calibration is missing"}


@pytest.mark.slow
def test_really_polluted_host_fails_the_host_condition() -> None:
    # real telemetry; real extra processes appear under this test during the "run"
    thresholds = GateThresholds(process_growth_min=2)
    telemetry = HostTelemetry(0.2, os.getpid(), None, thresholds).start()
    hogs = [subprocess.Popen(["sleep", "20"]) for _ in range(4)]
    try:
        time.sleep(0.5)
        host_summary = telemetry.stop()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    man, rs = manifest(), rows()
    failed = _failed(evaluate(man, rs, host_summary, _calibration(man, rs)))
    assert list(failed) == ["host_gate"]
    assert "abnormal_process_growth" in failed["host_gate"]


def test_missing_host_summary_fails() -> None:
    man, rs = manifest(), rows()
    failed = _failed(evaluate(man, rs, None, _calibration(man, rs)))
    assert failed == {"host_gate": "host telemetry summary is missing"}


def test_not_independent_or_unbalanced_order_fails() -> None:
    man, rs = manifest(score_mode="chrome_gated"), rows()
    failed = _failed(evaluate(man, rs, CLEAN_HOST, None))
    assert "score mode is 'chrome_gated'" in failed["independent_balanced"]
    skewed = rows()
    for row in skewed:
        row["order"]["position"] = 0 if row["engine"] == "chrome" else 1
    failed = _failed(evaluate(manifest(), skewed, CLEAN_HOST, None))
    assert "differing by 30" in failed["independent_balanced"]


def test_empty_intersection_and_metric_gaps() -> None:
    statuses = {(f"task_{t:03d}", "lightpanda", a): "fail" for t in range(6) for a in range(5)}
    failed = _failed(evaluate(manifest(), rows(statuses=statuses), CLEAN_HOST, None))
    assert failed["intersection_nonempty"] == "intersection is empty"
    gappy = rows()
    gappy[0]["resource"]["pss_peak_bytes"] = {
        "status": "unavailable",
        "reason": "permission_denied",
    }
    gappy[3]["traffic"] = traffic(available=False)
    result = evaluate(manifest(), gappy, CLEAN_HOST, None)
    metrics = next(c for c in result["conditions"] if c["id"] == "metrics_complete")
    assert not metrics["passed"] and metrics["figures"]["missing"] == 1 + 4
    assert {m["metric"] for m in metrics["figures"]["examples"]} >= {"pss_peak_bytes"}


def test_rows_outside_the_selection_fail_the_engines_condition() -> None:
    stray = rows(engines=("chrome", "lightpanda", "moli"))
    failed = _failed(evaluate(manifest(), stray, CLEAN_HOST, None))
    assert "outside the selection: moli" in failed["engines"]


def test_intersection_counts_excluded_statuses() -> None:
    statuses = {("task_001", "lightpanda", 2): "timeout", ("task_002", "chrome", 0): "crash"}
    inter = all_pass_intersection(rows(statuses=statuses), ["chrome", "lightpanda"])
    assert len(inter.keys) == 28 and inter.excluded_task_attempts == 2
    assert inter.excluded_status_by_engine == {
        "chrome": {"crash": 1, "pass": 1},
        "lightpanda": {"pass": 1, "timeout": 1},
    }
    assert ("task_001", 2) not in inter.keys
