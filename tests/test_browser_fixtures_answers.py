"""Expected-answer registries: loading the real corpus, modes, conflicts, inventory grading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser_fixture_helpers import corpus_or_skip
from metewand.suites.browser.fixtures import AnswerRegistry, grade_expected_answer, grade_inventory
from metewand.suites.browser.fixtures.answers import AnswerRegistryError, inventory_count


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_corpus_registry_covers_every_server_graded_task() -> None:
    root = corpus_or_skip()
    registry = AnswerRegistry.load((root,))
    assert len(registry.files) == 8  # the top file + 7 fragments
    graded = []
    for task_file in root.parent.glob("tasks/*/*/*.json"):
        task = json.loads(task_file.read_text())
        if task["grader"].get("endpoint") == "/__grade__/expected_answer":
            graded.append(task["task_id"])
    assert len(graded) > 100
    assert [t for t in graded if t not in registry.entries] == []
    assert "_comment" not in registry.entries


def test_modes(tmp_path: Path) -> None:
    write(
        tmp_path / "expected_answers.json",
        {
            "eq": {"expected": "A:1", "mode": "equals"},
            "has": {"expected": "needle", "mode": "contains"},
            "all": {"expected": ["x", "y"], "mode": "contains_all"},
            "_comment": "notes are skipped",
        },
    )
    registry = AnswerRegistry.load((tmp_path,))
    assert grade_expected_answer(registry, "eq", "A:1").ok
    assert not grade_expected_answer(registry, "eq", "A:1 ").ok
    assert grade_expected_answer(registry, "has", "hay needle hay").ok
    assert not grade_expected_answer(registry, "has", "hay").ok
    outcome = grade_expected_answer(registry, "all", "y then x")
    assert outcome.ok and outcome.checks[0].name == "answer_contains_all"
    missing = grade_expected_answer(registry, "all", "just x")
    assert not missing.ok and "'y'" in missing.checks[0].evidence
    assert grade_expected_answer(registry, "nope", "x").failure_class == "infra"
    assert not grade_expected_answer(registry, "eq", None).ok


def test_fragments_merge_and_conflicts_fail(tmp_path: Path) -> None:
    write(tmp_path / "a/expected_answers.fragment.json", {"t1": {"expected": "1"}})
    write(tmp_path / "b/expected_answers.fragment.json", {"t2": {"expected": "2"}})
    assert set(AnswerRegistry.load((tmp_path,)).entries) == {"t1", "t2"}
    write(tmp_path / "c/expected_answers.fragment.json", {"t1": {"expected": "other"}})
    with pytest.raises(AnswerRegistryError, match="t1"):
        AnswerRegistry.load((tmp_path,))


@pytest.mark.parametrize(
    "entry",
    [{"expected": "x", "mode": "fuzzy"}, {"expected": ["x"]}, {"mode": "contains_all"}, "text"],
)
def test_malformed_entries_name_file_and_task(tmp_path: Path, entry: object) -> None:
    write(tmp_path / "expected_answers.json", {"bad_task": entry})
    with pytest.raises(AnswerRegistryError, match=r"expected_answers\.json.*bad_task"):
        AnswerRegistry.load((tmp_path,))


def test_inventory_grading_needs_answer_and_both_events() -> None:
    seed = "abc"
    answer = str(inventory_count(seed))
    assert 10 <= int(answer) < 100
    assert grade_inventory(seed, answer, frozenset({"idb_write", "idb_read"})).ok
    assert not grade_inventory(seed, answer, frozenset({"idb_write"})).ok
    assert not grade_inventory(seed, "7", frozenset({"idb_write", "idb_read"})).ok
