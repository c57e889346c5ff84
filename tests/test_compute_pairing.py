"""Pairing groups (issue #14 step 2): on Dask a compute unit keeps one case's implementations for
one repetition on one host, in the plan's order; the local executor keeps its worker units."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from compare_helpers import sorting_copy
from metewand.suites.compute.manifest_load import load
from metewand.suites.compute.plan import Plan
from metewand.suites.compute.plan_expand import build_plan
from metewand.suites.compute.suite import _group_units, pairing_groups


def _sorting_plan(tmp_path: Path, reuse: bool) -> Plan:
    manifest = sorting_copy(tmp_path, repetitions=2)  # the counts below are for 2
    if reuse:  # the same benchmark with warm-ups on reused workers
        text = manifest.read_text().replace(
            'run_order = "randomized"',
            'run_order = "randomized"\nworker_reuse = true\nwarmup_runs = 1',
        )
        manifest.write_text(text)
    return build_plan(load(str(manifest)))


def _case(attempt: object) -> tuple[str, str, str]:
    return (attempt.experiment, attempt.case, attempt.dataset.identity)  # type: ignore[attr-defined]


def test_without_reuse_a_group_is_every_implementation_of_one_case_and_repetition(
    tmp_path: Path,
) -> None:
    plan = _sorting_plan(tmp_path, reuse=False)
    groups = pairing_groups(plan)
    # every worker unit in exactly one group
    assert sorted(i for g in groups for i in g) == list(range(len(plan.units)))
    seen = set()
    for members in groups:
        attempts = [a for i in members for a in plan.units[i]]
        assert len({_case(a) for a in attempts}) == 1
        assert len({a.repetition for a in attempts}) == 1
        assert sorted(a.implementation for a in attempts) == sorted(
            plan.manifest.experiments[0].implementations
        )
        assert members == sorted(members)  # the plan's order inside the group
        seen.add((_case(attempts[0]), attempts[0].repetition))
    assert len(seen) == len(groups)  # one group per case and repetition: 5 cases x 2
    assert len(groups) == 10
    # groups follow the plan's order of their first worker unit
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)


def test_with_reuse_a_group_is_the_cases_worker_units_whole(tmp_path: Path) -> None:
    plan = _sorting_plan(tmp_path, reuse=True)
    groups = pairing_groups(plan)
    assert len(groups) == 5  # a reused worker holds every repetition: one group per case
    for members in groups:
        assert len(members) == 3  # one worker unit per implementation
        for index in members:
            roles = Counter(a.role for a in plan.units[index])
            assert roles == {"warmup": 1, "measured": 2}


def test_a_group_leaves_out_what_the_store_holds_and_keeps_worker_units_apart(
    tmp_path: Path,
) -> None:
    plan = _sorting_plan(tmp_path, reuse=True)
    groups = pairing_groups(plan)
    first = plan.units[groups[0][0]]
    done = {first[0].key, *(a.key for a in plan.units[groups[1][0]])}
    units = _group_units(groups, plan, done)
    assert len(units) == 5
    parts = units[0].payload["parts"]
    assert parts[0] == [a.key for a in first[1:]]  # the rest of the worker unit, on one worker
    assert len(units[1].payload["parts"]) == 2  # a finished worker unit is not run again
    assert list(units[0].keys) == [k for part in parts for k in part]
