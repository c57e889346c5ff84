"""Why a browser selection is empty, filter by filter, on the built-in suite (no engine runs)."""

from __future__ import annotations

from metewand.suites.browser.run_config import builtin_suite_dir
from metewand.suites.browser.selection import explain_empty, tag_counts
from metewand.suites.browser.tasks import load_corpus

TASKS = load_corpus(builtin_suite_dir()).tasks


def test_tag_counts_are_per_tag_most_common_first() -> None:
    counts = tag_counts(TASKS)
    assert counts["version.v0_1"] == len(TASKS) and counts["purpose.negative"] == 1
    assert list(counts.values()) == sorted(counts.values(), reverse=True)


def test_each_filter_says_what_it_kept_of_what_was_left() -> None:
    lines = explain_empty(TASKS, subsets=["l2.web_platform"], tags=["purpose.negative"])
    assert lines == [
        "--tag purpose.negative: 1 task, all in l1.raw_cdp",
        "--subset l2.web_platform: 0 of them (on its own 6 tasks)",
    ]
    lines = explain_empty(
        TASKS, task_ids=["own_ax_tree", "nope"], tags=["family.own", "family.own_l2"]
    )
    assert (
        lines[0]
        == "--tag family.own, --tag family.own_l2: 29 tasks, in l1.raw_cdp (23), l2.web_platform (6)"
    )
    assert lines[1] == "--task own_ax_tree, --task nope: 1 of them, all in l1.raw_cdp"


def test_an_unknown_value_is_named_with_what_exists() -> None:
    (line,) = explain_empty(TASKS, tags=["purpose.negativ"])
    assert line.startswith(
        "--tag purpose.negativ: no task has this tag (did you mean purpose.negative?"
    )
    (line,) = explain_empty(TASKS, task_ids=["own_nothing"])
    assert line == "--task own_nothing: no valid task with this id"
