"""``metewand compare`` on real runs of the sorting example (acceptance 2).

Both implementations are the built-in sort plus a fixed CPU burn (tests/workers/delayed_sort.py
with METEWAND_TEST_BURN), so the timed operation's CPU time is long and steady enough to judge
on a shared, loaded host, where wall time between two separate runs can move 2x with the load
(an A/A pair at load 20 did); the "slow" implementation of the third run burns 30% longer. The
gates judge cpu_time_ns: a polluted host refuses a wall-time gate (test_compare_verdicts).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from compare_helpers import metewand, run_manifest, sorting_manifest
from metewand import canonical
from metewand.runtime import schemas

DELAY_MS = 150
REPETITIONS = 9


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("compare_compute")
    (tmp / "same").mkdir()
    (tmp / "slower").mkdir()
    same = sorting_manifest(tmp / "same", 1.0, REPETITIONS, DELAY_MS, burn=True)
    slower = sorting_manifest(tmp / "slower", 1.3, REPETITIONS, DELAY_MS, burn=True)
    return {
        "base": run_manifest(same, tmp, "base"),
        "again": run_manifest(same, tmp, "again"),
        "slow": run_manifest(slower, tmp, "slow"),
    }


def test_a_30_percent_slower_worker_fails_the_gate_and_is_named(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    done = metewand(
        "compare",
        runs["base"],
        runs["slow"],
        "--fail-on-regression",
        "--threshold",
        "5%",
        "--format",
        "md,json,html",
        "--out",
        tmp_path,
        "--metric",
        "cpu_time_ns",
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    result = canonical.loads((tmp_path / "compare.json").read_bytes())
    assert schemas.violations("metewand_compare-2", result) == []
    verdicts = {(g["case"], g["implementation"]): g["verdict"] for g in result["groups"]}
    assert len(verdicts) == 4 and not result["unmatched"]["only_in_base"]
    for (case, impl), verdict in verdicts.items():
        if impl == "slow":
            assert verdict == "slower", (case, result["groups"])
    named = [r for r in result["regression_reasons"] if " x slow: slower" in r]
    assert len(named) == 2 and all("size=" in r for r in named)  # the cases are named
    assert "size=2000" in done.stdout and "slower" in done.stdout
    # the changed worker configuration is a provenance difference, listed first
    facts = [d["fact"] for d in result["provenance_differences"]]
    assert "implementation_config.slow" in facts
    # so `slow`'s own prepare is not trusted as its speed between the runs: the host's drift
    # comes from `steady`, whose code is the same on both sides (compare.speed_sides)
    fits = result["statistics"]["speed_adjustment"]["implementations"]
    assert fits["steady"]["applied"] and fits["steady"]["host_drift"] is None
    assert fits["slow"]["applied"] and fits["slow"]["host_drift"] is not None
    assert math.isclose(fits["slow"]["host_drift"], fits["steady"]["probe_ratio"], rel_tol=0.2)
    assert fits["steady"]["units"] == fits["slow"]["units"] == 2 * 2 * REPETITIONS
    assert all("speed_adjustment" in group for group in result["groups"])
    md = (tmp_path / "compare.md").read_text()
    assert md.index("Provenance differences") < md.index("## Groups")
    html = (tmp_path / "compare.html").read_text()
    assert "<script" not in html and "slower" in html


def test_a_a_is_no_change_everywhere(runs: dict[str, Path]) -> None:
    done = metewand(
        "compare",
        runs["base"],
        runs["again"],
        "--fail-on-regression",
        "--json",
        "--metric",
        "cpu_time_ns",
    )
    result = canonical.loads(done.stdout.encode())
    assert [g["verdict"] for g in result["groups"]] == ["no change"] * 4, result["groups"]
    account = result["statistics"]["speed_adjustment"]
    assert account["status"] == "used" and account["probe"] == "phase.prepare.cpu_ns"
    assert all(fit["applied"] for fit in account["implementations"].values())
    assert result["provenance_differences"] == [] or all(
        d["fact"].startswith("pollution") for d in result["provenance_differences"]
    )
    assert not result["status_changes"] and result["regression"] is False


def test_unmatched_groups_are_listed_and_bad_input_exits_2(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    done = metewand("compare", runs["base"], runs["slow"], "--metric", "nope", check=False)
    assert done.returncode == 2 and "not a compute metric" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = metewand("compare", runs["base"], empty, check=False)
    assert done.returncode == 2 and "results.jsonl" in done.stderr
    cpu = metewand("compare", runs["base"], runs["again"], "--metric", "cpu_time_ns", "--json")
    assert canonical.loads(cpu.stdout.encode())["metric"] == "cpu_time_ns"


def test_groups_in_one_run_only_are_listed(runs: dict[str, Path], tmp_path: Path) -> None:
    """A run that lost an implementation (its rows removed, as a narrower manifest would)."""
    narrower = tmp_path / "narrower"
    shutil.copytree(runs["again"], narrower, ignore=shutil.ignore_patterns("artifacts"))
    lines = (narrower / "results.jsonl").read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if canonical.loads(line)["implementation"] != "slow"]
    (narrower / "results.jsonl").write_bytes(b"".join(kept))
    done = metewand(
        "compare",
        runs["base"],
        narrower,
        "--json",
        "--fail-on-regression",
        "--metric",
        "cpu_time_ns",
    )
    result = canonical.loads(done.stdout.encode())
    only = result["unmatched"]["only_in_base"]
    assert len(only) == 2 and {impl for _, impl in only} == {"slow"}
    assert {g["implementation"] for g in result["groups"]} == {"steady"}


def test_out_under_a_file_is_invalid_input(runs: dict[str, Path], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = metewand(
        "compare",
        runs["base"],
        runs["again"],
        "--format",
        "md",
        "--out",
        blocker / "sub",
        check=False,
    )
    assert done.returncode == 2 and "cannot write into" in done.stderr
    assert "Traceback" not in done.stderr
