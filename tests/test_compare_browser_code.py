"""A browser row's code identity (``compare.browser_code``), and what it turns on in ``compare``
of separate runs: the spread between runs read across the unchanged groups, and each engine read
against the host's drift that the other, unchanged engine read. Three real runs of Chrome and
Lightpanda: two of the same engines, and one whose Chrome is another binary."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import ABOUT_BLANK_TASK, cli, tiny_corpus
from metewand.compare import browser_code
from metewand.compare.run_compare import compare_runs
from metewand.compare.rundir import RunData, load_run

TASKS = {"t_sum": "1+1", "t_mul": "2*1", "t_len": "'ab'.length"}  # each evaluates to 2
K = 5  # the fewest passing attempts a group needs to be judged


def _task(task_id: str, expression: str) -> dict[str, Any]:
    task = copy.deepcopy(ABOUT_BLANK_TASK)
    task["task_id"] = task_id
    task["driver"]["steps"][0]["params"]["expression"] = expression
    return task


def _run(root: Path, corpus: Path, run_id: str, chrome: Path | None = None) -> Path:
    env = {"METEWAND_CHROME_BIN": str(chrome)} if chrome is not None else None
    args = ["browser", "run", "--tasks", str(corpus), "--engines", "chrome,lightpanda"]
    args += ["--k", str(K), "--out", str(root / "runs"), "--run-id", run_id]
    args += ["--no-progress", "--host-telemetry", "off", "--no-history"]
    done = cli(*args, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return root / "runs" / run_id


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunData]:
    """``a`` and ``b``: the same engines and corpus; ``c``: Chrome through a wrapper script, the
    same Chromium under another binary (as a rebuilt engine would be)."""
    root = tmp_path_factory.mktemp("browser_code")
    corpus = tiny_corpus(root / "corpus", {f"{t}.json": _task(t, e) for t, e in TASKS.items()})
    a = load_run(_run(root, corpus, "a"))
    chromium = a.manifest["engines"]["chrome"]["binary_path"]
    wrapper = root / "chrome-rebuilt"
    wrapper.write_text(f'#!/bin/sh\nexec {chromium} "$@"\n')
    wrapper.chmod(0o755)
    return {
        "a": a,
        "b": load_run(_run(root, corpus, "b")),
        "c": load_run(_run(root, corpus, "c", chrome=wrapper)),
    }


def _codes(run: RunData) -> dict[tuple[str, str], set[str | None]]:
    out: dict[tuple[str, str], set[str | None]] = {}
    for row in run.rows:
        key = (row["task_id"], row["engine"])
        out.setdefault(key, set()).add(browser_code.codes_of(run)(row))
    return out


def test_identity_is_one_per_group_the_same_across_runs_and_changes_with_the_binary(
    runs: dict[str, RunData],
) -> None:
    a, b, c = (_codes(runs[name]) for name in "abc")
    assert set(a) == {(t, e) for t in TASKS for e in ("chrome", "lightpanda")}
    assert all(len(codes) == 1 and None not in codes for codes in a.values())
    assert a == b  # same binaries, corpus, harness and settings
    assert len({next(iter(codes)) for codes in a.values()}) == len(a)  # its task is in it
    for key in a:
        same = a[key] == c[key]
        assert same == (key[1] == "lightpanda"), key  # only the rebuilt Chrome changed


@pytest.mark.parametrize(
    ("path", "required"),
    [
        ("corpus.shared_sha256", False),  # an older run's manifest: the whole corpus's digest
        ("runner.source.tree_sha256", True),
        ("engines.lightpanda.binary_sha256", True),
        ("engines.lightpanda.version_output", False),  # an engine behind the same wrapper
        ("adapter_mode", False),
    ],
)
def test_a_changed_or_missing_part_changes_or_drops_the_identity(
    runs: dict[str, RunData], path: str, required: bool
) -> None:
    run = runs["a"]
    row = next(r for r in run.rows if r["engine"] == "lightpanda")
    before = browser_code.codes_of(run)(row)

    def with_value(value: Any) -> RunData:
        manifest = copy.deepcopy(run.manifest)
        *parents, leaf = path.split(".")
        node = manifest
        for part in parents:
            node = node[part]
        node[leaf] = value
        return RunData(path=run.path, manifest=manifest, rows=run.rows)

    changed = browser_code.codes_of(with_value("0" * 64))(row)
    assert changed is not None and changed != before
    missing = browser_code.codes_of(with_value(None))(row)
    if required:
        assert missing is None  # an older run, or the peer's: no identity
    else:
        assert missing is not None and missing not in (before, changed)


def test_an_edited_task_changes_that_tasks_identity_alone(runs: dict[str, RunData]) -> None:
    """The manifest records the shared part of the corpus and each run task's own file: a task
    edited between two runs is changed work on every engine, and the others stay unchanged (the
    controls and the spread across groups keep them). Without the parts (an older run) the
    whole corpus's digest stands, and without that no row has an identity."""
    run = runs["a"]
    corpus = run.manifest["corpus"]
    assert set(corpus["task_sha256"]) == set(TASKS) and corpus["shared_sha256"]
    before = _codes(run)

    def edited(change: Callable[[dict[str, Any]], None]) -> dict[tuple[str, str], set[str | None]]:
        manifest = copy.deepcopy(run.manifest)
        change(manifest["corpus"])
        return _codes(RunData(path=run.path, manifest=manifest, rows=run.rows))

    one_task = edited(lambda c: c["task_sha256"].update(t_sum="0" * 64))
    for key, codes in one_task.items():
        assert (codes == before[key]) == (key[0] != "t_sum"), key
    untracked = edited(lambda c: c["task_sha256"].pop("t_mul"))
    assert untracked[("t_mul", "chrome")] == {None}
    assert untracked[("t_sum", "chrome")] == before[("t_sum", "chrome")]

    def older(corpus: dict[str, Any]) -> None:
        del corpus["task_sha256"], corpus["shared_sha256"]

    whole = edited(older)
    assert all(None not in codes and codes != before[key] for key, codes in whole.items())
    assert all(codes == {None} for codes in edited(lambda c: c.clear()).values())


def test_a_row_of_an_engine_the_manifest_does_not_name_has_no_identity(
    runs: dict[str, RunData],
) -> None:
    run = runs["a"]
    row = {**run.rows[0], "engine": "moli"}
    assert browser_code.codes_of(run)(row) is None


def test_an_a_a_pair_reads_the_spread_across_groups_and_each_engine_against_the_other(
    runs: dict[str, RunData],
) -> None:
    result = compare_runs(runs["a"], runs["b"], metric="engine_cpu_ns")
    statistics = result["statistics"]
    assert statistics["cross_section"]["status"] == "used", statistics["cross_section"]
    assert statistics["cross_section"]["metrics"]["engine_cpu_ns"]["unchanged_groups"] == 6
    account = statistics["controls"]
    assert account["status"] == "used" and account["unchanged"] == ["chrome", "lightpanda"]
    engines = account["metrics"]["engine_cpu_ns"]["implementations"]
    assert engines["chrome"]["controls"] == ["lightpanda"]
    assert engines["lightpanda"]["controls"] == ["chrome"]
    assert engines["chrome"]["control_groups"] == len(TASKS)


def test_a_rebuilt_engine_is_read_against_the_unchanged_one_and_not_the_other_way(
    runs: dict[str, RunData],
) -> None:
    result = compare_runs(runs["a"], runs["c"], metric="engine_cpu_ns")
    account = result["statistics"]["controls"]
    assert account["unchanged"] == ["lightpanda"]
    block = account["metrics"]["engine_cpu_ns"]
    assert block["implementations"]["chrome"]["controls"] == ["lightpanda"]
    assert "lightpanda" not in block["implementations"]
    assert "lightpanda" in block["not_adjusted"]  # no unchanged engine is left to read it
    # three unchanged groups: fewer than the five others a spread across groups needs
    across = result["statistics"]["cross_section"]
    assert across["status"] == "not used", across
    chrome_pin = {d["fact"] for d in result["provenance_differences"]}
    assert any("chrome" in fact for fact in chrome_pin), chrome_pin


def test_an_edited_task_is_no_control_and_the_engines_other_groups_stay_unchanged(
    runs: dict[str, RunData],
) -> None:
    """Run b with one task's file edited (its recorded digest): that task's groups are changed
    on both engines, and they take no part in the drift or the spread across groups, while each
    engine's other groups do. With three tasks that leaves each engine two control groups, one
    fewer than a drift needs, and four unchanged groups for the spread."""
    manifest = copy.deepcopy(runs["b"].manifest)
    manifest["corpus"]["task_sha256"]["t_sum"] = "0" * 64
    edited = RunData(path=runs["b"].path, manifest=manifest, rows=runs["b"].rows)
    result = compare_runs(runs["a"], edited, metric="engine_cpu_ns")
    block = result["statistics"]["controls"]["metrics"]["engine_cpu_ns"]
    assert block["implementations"] == {}
    for engine in ("chrome", "lightpanda"):  # 3 before the edit
        assert block["not_adjusted"][engine].startswith("2 groups of other unchanged"), block
    across = result["statistics"]["cross_section"]["metrics"]["engine_cpu_ns"]
    assert across["unchanged_groups"] == 2 * len(TASKS) - 2
