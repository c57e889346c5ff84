"""``compare`` borrows each group's between-run spread from the run history (issue #22, section 2):
a side of one run adds the variance the group's level showed between earlier runs on this host,
so a change must exceed it. Real runs of a delayed built-in sort, added to a real DuckDB file.

The history's three earlier runs move one implementation (``slow``) by a factor of up to 12 from
run to run and leave the other (``steady``) alone; a threefold step of ``slow`` is then "slower"
without the history (its own repetitions are tight) and "no change" with it, its CI wider
(``steady``'s verdicts are not asserted: on a busy host two runs may drift apart, which is the
very noise the history is for). The same runs then show what happens without a
history, and with one named that is absent or not a history.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from compare_helpers import metewand, run_manifest, sorting_manifest
from metewand import canonical
from metewand.runtime import schemas

pytestmark = pytest.mark.slow

CPU = ("--metric", "cpu_time_ns")
EARLIER_SLOWDOWNS = (1.0, 6.0, 0.5)  # ``slow``'s level in the history's earlier runs


def _run(tmp: Path, name: str, slowdown: float) -> Path:
    directory = tmp / name
    directory.mkdir()
    return run_manifest(sorting_manifest(directory, slowdown, 5, 40, burn=True), tmp, name)


def _compare(*args: str | Path) -> dict:
    # CPU time: the workers burn their delay, and a loaded host (CI) stretches wall time far more
    return canonical.loads(metewand("compare", *args, *CPU, "--json").stdout.encode())


def _verdicts(result: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for group in result["groups"]:
        out.setdefault(group["implementation"], set()).add(group["verdict"])
    return out


def _gate_passed(run: Path) -> bool | None:
    summary = canonical.loads((run / "host_summary.json").read_bytes())
    return summary.get("gate", {}).get("passed")


def _by_group(result: dict) -> dict[tuple[str, str], dict]:
    return {(g["case"], g["implementation"]): g for g in result["groups"]}


def test_a_change_must_exceed_the_groups_spread_between_earlier_runs(tmp_path: Path) -> None:
    history = Path(os.environ["METEWAND_HISTORY"])  # each test's own (conftest)
    for index, slowdown in enumerate(EARLIER_SLOWDOWNS):
        _run(tmp_path, f"earlier{index}", slowdown)
    base = _run(tmp_path, "base", 1.0)
    new = _run(tmp_path, "new", 3.0)

    blind = _compare(base, new, "--no-history")
    assert blind["statistics"]["history"] == {"status": "off", "reason": "--no-history"}
    assert _verdicts(blind)["slow"] == {"slower"}

    informed = _compare(base, new)
    assert schemas.violations("metewand_compare-2", informed) == []
    account = informed["statistics"]["history"]
    assert account["status"] == "used" and account["path"] == str(history)
    # 2 cases x 2 implementations x (CPU, its wall companion), each over the 3 earlier runs
    # only: the compared runs themselves are left out. The wall companion's spread is of the
    # earlier runs with a clean host gate when both compared runs had one: on a busy host
    # (CI) fewer than 3 of them may be clean, and then the wall groups have no spread
    earlier = [_gate_passed(tmp_path / "runs" / f"earlier{i}") for i in range(3)]
    compared_clean = _gate_passed(base) is not False and _gate_passed(new) is not False
    wall_spread = not compared_clean or all(passed is not False for passed in earlier)
    assert (account["groups"], account["earlier_runs"]) == (8 if wall_spread else 4, [3, 3])
    assert account["clean_runs_only"] == (["timed_wall_time_ns"] if compared_clean else [])
    assert informed["statistics"]["history_between_run"] is True
    assert _verdicts(informed)["slow"] == {"no change"}
    blind_groups = _by_group(blind)
    for key, group in _by_group(informed).items():
        # every unit, and the history's spread, taken speed-adjusted (compare.speed_sides)
        # (each group's spread moderated by the other three of its metric: history.spread)
        source = re.compile(r"history: 3 earlier runs, moderated \(df \d+\), speed-adjusted")
        assert source.fullmatch(group["between_run_source"]), group["between_run_source"]
        if wall_spread:
            assert source.fullmatch(group["companion"]["between_run_source"])
        if key[1] == "slow":  # the group whose level moved between runs: a far wider CI
            (low, high), (b_low, b_high) = group["ratio_ci95"], blind_groups[key]["ratio_ci95"]
            assert low < b_low and high > b_high, key
    text = metewand("compare", base, new, *CPU).stdout
    assert f"between-run noise from the history ({history})" in text

    absent = tmp_path / "elsewhere.duckdb"
    refused = metewand("compare", base, new, "--history", absent, check=False)
    assert refused.returncode == 2
    assert f"error: --history {absent}: no such file" in refused.stderr
    foreign = tmp_path / "foreign.duckdb"
    foreign.write_bytes(b"not a database at all\n" * 100)
    refused = metewand("compare", base, new, "--history", foreign, check=False)
    assert refused.returncode == 2
    assert str(foreign) in refused.stderr and "--no-history" in refused.stderr

    history.unlink()  # the default history gone: the comparison says so, and judges without
    assert _compare(base, new)["statistics"]["history"] == {
        "status": "absent",
        "path": str(history),
    }
    assert f"no history at {history}" in metewand("compare", base, new, *CPU).stdout
