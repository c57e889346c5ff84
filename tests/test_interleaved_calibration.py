"""``--resource-calibration interleaved``: one profiled run measures its own observer effect from
attempts run twice back to back on the same engine process, once with the sampler and once
without (order alternating per engine). Real Chrome and Lightpanda on the built-in suite."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from browser_run_helpers import cli, rows_of
from metewand.cli.browser_preflight import never_eligible
from metewand.compare.calibration import calibrate_interleaved
from metewand.compare.generate import write_after_run
from metewand.compare.rundir import load_run
from metewand.runtime.schemas import violations
from metewand.suites.browser.run_config import ResourceOptions, RunConfig, builtin_suite_dir
from metewand.suites.browser.run_plan import build_plan
from metewand.suites.browser.runner import run_browser
from peer_layouts import assert_peer_layouts

ENGINES = ("chrome", "lightpanda")
TASKS = ("own_eval_values", "own_dom_saved_chain", "own_l2_inner_text")


def _config(
    k: int,
    calibration: str = "interleaved",
    profile: str = "engine",
    every: int = 1,
    seed: str = "ilv",
) -> RunConfig:
    resource = ResourceOptions(
        profile=profile,
        calibration=calibration,
        calibration_every=every,
        cold_start_samples=1,
        reference_engine="chrome",
        host_sample_interval_s=0.5,
    )
    return RunConfig(
        str(builtin_suite_dir()), ENGINES, k=k, seed=seed, task_ids=TASKS, resource=resource
    )


def _is_number(value: object) -> bool:
    """A figure, not null: canonical JSON (RFC 8785) writes 0.0 as 0, so an exact zero delta (the
    median pair's durations equal to the millisecond) reads back as an int."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_plan_puts_each_twin_beside_its_attempt_with_the_order_balanced() -> None:
    plain = build_plan(_config(3, calibration="separate")).attempts
    paired = build_plan(_config(3)).attempts
    assert len(paired) == 2 * len(plain)
    assert [p for p in paired if p.observed] == plain  # the profiled attempts keep their order
    first: Counter[tuple[str, bool]] = Counter()
    for one, two in zip(paired[::2], paired[1::2], strict=True):
        same = (one.task.task_id, one.engine, one.attempt, one.round, one.position)
        assert same == (two.task.task_id, two.engine, two.attempt, two.round, two.position)
        assert {one.observed, two.observed} == {True, False}
        assert one.key != two.key and {one.key, two.key} >= {two.key.removesuffix("-observer-off")}
        first[(one.engine, one.observed)] += 1
    pairs_per_engine = len(TASKS) * 3  # 9: odd, so the profiled-first side has one more
    for engine in ENGINES:
        assert first[(engine, True)] == pairs_per_engine // 2 + 1
        assert first[(engine, False)] == pairs_per_engine // 2


def _refused(*flags: str) -> str:
    """``browser run --engines chrome *flags`` refused before anything runs: its stderr."""
    done = cli("browser", "run", "--engines", "chrome", *flags, "--out", "/nonexistent-ilv")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def test_a_sampled_calibration_twins_whole_rounds_drawn_with_the_seed() -> None:
    plain = build_plan(_config(8, calibration="separate")).attempts
    rounds = sorted({p.round for p in plain})  # 3 tasks x k=8: 24 rounds
    paired = build_plan(_config(8, every=4)).attempts
    assert [p for p in paired if p.observed] == plain
    twins = [p for p in paired if not p.observed]
    twinned = {p.round for p in twins}
    assert len(twinned) == len(rounds) // 4  # 6 rounds, each with every engine's twin
    assert len(twins) == len(twinned) * len(ENGINES)
    for index, planned in enumerate(paired):  # each twin is beside its own attempt
        if not planned.observed:
            beside = [paired[i] for i in (index - 1, index + 1) if 0 <= i < len(paired)]
            assert any(b.observed and b.key + "-observer-off" == planned.key for b in beside)
    # the same seed draws the same rounds (a resume repeats the plan); the draw is not the
    # plan's first rounds, and another seed draws others
    assert [p.key for p in build_plan(_config(8, every=4)).attempts] == [p.key for p in paired]
    assert twinned != set(rounds[: len(twinned)])
    other = build_plan(_config(8, every=4, seed="another")).attempts
    assert {p.round for p in other if not p.observed} != twinned
    # rounded up: 24 rounds, one in 5 is 5 rounds
    fifth = build_plan(_config(8, every=5)).attempts
    assert len({p.round for p in fifth if not p.observed}) == 5


def test_a_sampled_calibration_needs_interleaved_and_a_sane_n() -> None:
    assert any(
        "--resource-calibration-every must be between 1 and" in p
        for p in (_config(2, every=0).problems())
    )
    separate = _config(2, calibration="separate", every=2).problems()
    assert "--resource-calibration-every samples interleaved calibration's twins" in separate
    refused = _refused(
        "--resource-profile",
        "engine",
        "--resource-calibration",
        "peer-ab",
        "--resource-calibration-every",
        "4",
    )
    assert "samples interleaved calibration's twins" in refused


def test_interleaved_needs_the_engine_profile_and_no_separate_baseline() -> None:
    problems = _config(1, profile="baseline").problems()
    assert "--resource-calibration interleaved needs --resource-profile engine" in problems
    with_baseline = RunConfig(
        str(builtin_suite_dir()),
        ENGINES,
        resource=ResourceOptions(
            profile="engine", calibration="interleaved", calibration_baseline="base"
        ),
    )
    assert any("drop --resource-calibration-baseline" in p for p in with_baseline.problems())
    refused = _refused("--resource-profile", "baseline", "--resource-calibration", "interleaved")
    assert "needs --resource-profile engine" in refused


def test_an_interleaved_run_is_its_own_calibration_before_it_starts(tmp_path: Path) -> None:
    """The up-front eligibility look (warning, ``--require-eligible``) counts the twins as the
    calibration: no baseline run is asked for."""
    assert never_eligible(_config(5)) == []
    assert never_eligible(_config(5, calibration="separate")) == [
        "--resource-calibration peer-ab without --resource-calibration-baseline; "
        "eligibility needs a calibration (interleaved, the default, needs none)"
    ]
    done = cli(
        "browser",
        "run",
        "--engines",
        "chrome,lightpanda",
        "--k",
        "1",
        "--resource-profile",
        "engine",
        "--resource-calibration",
        "interleaved",
        "--require-eligible",
        "--out",
        str(tmp_path / "runs"),
    )
    assert done.returncode == 2, done.stderr
    assert "--k 1; eligibility needs k >= 5" in done.stderr
    assert "calibration" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()
    # a profiled run with no calibration asked for calibrates interleaved
    unasked = cli(
        "browser",
        "run",
        "--engines",
        "chrome,lightpanda",
        "--k",
        "1",
        "--resource-profile",
        "engine",
        "--require-eligible",
        "--out",
        str(tmp_path / "runs"),
    )
    assert unasked.returncode == 2 and "calibration" not in unasked.stderr, unasked.stderr


def test_interleaved_run_pairs_twins_and_keeps_them_out_of_scores(tmp_path: Path) -> None:
    said: list[str] = []
    result = run_browser(_config(2), tmp_path, "ilv", echo=said.append)
    assert result.exit_code == 0 and result.run_dir is not None
    matrix = len(TASKS) * len(ENGINES) * 2
    # the twins are announced as twins, not as a matrix twice its shape
    assert (
        f"ilv: {2 * matrix} of {2 * matrix} attempts to run (3 tasks x 2 engines x k=2, each "
        "attempt also run once unprofiled beside it (interleaved calibration))" in said[0]
    )
    write_after_run(result.run_dir)
    d = result.run_dir
    rows = rows_of(d)
    twins = [r for r in rows if r.get("calibration_twin") is True]
    profiled = [r for r in rows if "calibration_twin" not in r]
    assert len(twins) == len(profiled) == len(TASKS) * len(ENGINES) * 2
    by_pair = {(r["task_id"], r["engine"], r["attempt"]): r for r in profiled}
    for twin in twins:
        partner = by_pair[(twin["task_id"], twin["engine"], twin["attempt"])]
        assert twin["observer"] == "off" and twin["score_included"] is False
        # unprofiled: the same collection window, no sampler, no resource record
        assert "resource" not in twin and twin["collection_wall_ms"] > 0
        assert "resource" in partner and partner["score_included"] is True
        # no observer at all: the twin takes no phase marks, its profiled partner does
        assert "phases" not in twin and partner["phases"]["engine"]["mark_count"] > 0
        # the same engine process ran both
        assert twin["run_context"]["browser_pid"] == partner["run_context"]["browser_pid"]
        assert twin["artifact_dir"] == partner["artifact_dir"] + "-observer-off"
        assert (d / twin["artifact_dir"] / "outcome.json").exists()
    run = load_run(d)
    assert len(run.rows) == len(profiled) and len(run.calibration_twins) == len(twins)
    calibration = calibrate_interleaved(run.manifest, run.rows, run.calibration_twins)
    assert violations("metewand_calibration-1", calibration) == []
    # each engine's first pair holds its process's first attempt (a cold start): not figured
    figured = len(twins) - len(ENGINES)
    assert calibration["mode"] == "interleaved" and calibration["overall"]["pairs"] == figured
    assert calibration["first_on_launch"]["pairs"] == len(ENGINES)
    assert calibration["not_same_process"]["pairs"] == 0
    assert {c["name"] for c in calibration["checks"]} >= {"fully_paired", "status_mismatch_rate"}
    scores = json.loads((d / "scores.json").read_text())
    for engine in ENGINES:  # the twins never enter pass/fail counts
        assert scores["by_engine"][engine]["attempts"]["total"] == len(TASKS) * 2
    summary = json.loads((d / "resource_summary.json").read_text())
    assert violations("abb_resource_summary-1", summary) == []
    assert violations("metewand_resource_summary-1", summary) == []
    observer = summary["observer_effect"]
    assert observer["calibration_mode"] == "interleaved"
    assert observer["matched_attempts"] == figured and observer["complete_pairing"] is True
    assert observer["pairs_first_on_launch"] == len(ENGINES)
    order = observer["pair_order"]
    assert order["profiled_first"] + order["unprofiled_first"] + order["order_unknown"] == figured
    # the plan balances every engine's pairs (3 and 3); the excluded first pair ran profiled first
    assert order["unprofiled_first"] - order["profiled_first"] == len(ENGINES)
    for engine in ENGINES:
        figures = observer["by_engine"][engine]
        assert figures["matched_attempts"] == len(TASKS) * 2 - 1
        assert _is_number(figures["median_duration_delta_pct"])
        assert _is_number(figures["median_collection_wall_delta_pct"])
    for engine, block in summary["by_engine"].items():  # resource medians: profiled rows only
        assert block["sampling"]["attempts"] == len(TASKS) * 2, engine
        assert block["intersection_attempts"] <= len(TASKS) * 2, engine
    conditions = {c["id"]: c for c in summary["eligibility_conditions"]}
    assert conditions["calibration"]["reason"].startswith(("interleaved", "calibration failed"))
    # twins add no cold start (one per engine, as asked) and no process growth to the gate
    cold = [json.loads(line) for line in (d / "cold_start.jsonl").read_text().splitlines()]
    assert Counter(r["engine"] for r in cold) == dict.fromkeys(ENGINES, 1)
    assert {e: summary["cold_start"]["by_engine"][e]["samples"] for e in ENGINES} == dict.fromkeys(
        ENGINES, 1
    )
    host = json.loads((d / "host_summary.json").read_text())
    assert "abnormal_process_growth" in host["gate"]["evaluated"]
    assert "abnormal_process_growth" not in host["flags"], host["gate"]["triggered"]
    card = (d / "resource-card.md").read_text()
    assert "Observer effect from interleaved pairs in this run" in card
    assert f"{len(ENGINES)} pair(s) held the first attempt on a freshly launched engine" in card
    manifest = json.loads((d / "run_manifest.json").read_text())
    assert manifest["resource_profile"]["calibration"] == "interleaved"
    assert manifest["completed_result_rows"] == manifest["expected_result_rows"] == len(rows)
    assert manifest["data"]["selection"]["calibration_twins"] == len(twins) == matrix
    shown = cli("status", str(d))
    assert shown.returncode == 0, shown.stderr
    assert (
        f"{len(rows)} finished ({len(twins)} of them unprofiled calibration twins)" in shown.stdout
    )
    twin = twins[0]
    seen = cli("inspect", str(d), "--key", twin["key"], "--json")
    assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout)["key"] == twin["key"]
    seen = cli(
        "inspect",
        str(d),
        "--task",
        twin["task_id"],
        "--engine",
        twin["engine"],
        "--attempt",
        str(twin["attempt"]),
        "--json",
    )
    assert json.loads(seen.stdout)["key"] == twin["key"].removesuffix("-observer-off")
    assert_peer_layouts(d)  # the twin rows are peer-readable rows too (score_included false)


def test_a_run_calibrated_on_a_sample_of_rounds_is_fully_paired(tmp_path: Path) -> None:
    """One round in 3 twinned: the profiled rows of the other rounds are no unmatched half."""
    said: list[str] = []
    result = run_browser(_config(2, every=3), tmp_path, "ilv3", echo=said.append)
    assert result.exit_code == 0 and result.run_dir is not None
    assert "4 of its attempts also run once unprofiled beside them" in said[0], said[0]
    assert "one round in 3" in said[0]
    run = load_run(result.run_dir)
    assert len(run.rows) == len(TASKS) * len(ENGINES) * 2 and len(run.calibration_twins) == 4
    assert {r["order"]["round"] for r in run.calibration_twins} < {
        r["order"]["round"] for r in run.rows
    }
    calibration = calibrate_interleaved(run.manifest, run.rows, run.calibration_twins)
    assert violations("metewand_calibration-1", calibration) == []
    assert calibration["calibration_every"] == 3
    paired = next(c for c in calibration["checks"] if c["name"] == "fully_paired")
    assert paired["passed"], paired
    assert paired["figures"]["matched"] == 4 and paired["figures"]["only_in_profiled"] == 0
    manifest = json.loads((result.run_dir / "run_manifest.json").read_text())
    assert manifest["data"]["resource_profile"]["calibration_every"] == 3
