"""``metewand compare`` on two real browser runs where one task's status changed (acceptance 3)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from browser_run_helpers import ABOUT_BLANK_TASK, cli, tiny_corpus
from metewand import canonical
from metewand.runtime import schemas


def _task(task_id: str, expression: str, expected: int) -> dict[str, Any]:
    task = copy.deepcopy(ABOUT_BLANK_TASK)
    task["task_id"] = task_id
    task["driver"]["steps"][0]["params"]["expression"] = expression
    task["grader"]["checks"][0]["expected"] = expected
    return task


def _run(tmp: Path, name: str, expected_sum: int) -> Path:
    corpus = tiny_corpus(
        tmp / f"corpus_{name}",
        {
            "sum.json": _task("tiny_sum", "1+1", expected_sum),
            "mul.json": _task("tiny_mul", "2*3", 6),
        },
    )
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "chrome",
        "--k",
        "2",
        "--out",
        str(tmp / "runs"),
        "--run-id",
        name,
        "--no-progress",
        "--host-telemetry",
        "off",
    )
    assert done.returncode in (0, 1), done.stderr
    return tmp / "runs" / name


def test_a_status_change_is_listed_and_fails_the_gate(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", 2)
    new = _run(tmp_path, "new", 3)  # the grader of tiny_sum now expects 3: the task fails
    done = cli(
        "compare",
        str(base),
        str(new),
        "--fail-on-regression",
        "--format",
        "json",
        "--out",
        str(tmp_path),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    result = canonical.loads((tmp_path / "compare.json").read_bytes())
    assert schemas.violations("metewand_compare-2", result) == []
    assert result["suite"] == "browser" and result["metric"] == "duration_ms"
    changes = {
        (c["task"], c["engine"]): (c["base_status"], c["new_status"])
        for c in result["status_changes"]
    }
    assert changes == {("tiny_sum", "chrome"): ("pass", "fail x2")}
    assert any("tiny_sum x chrome: pass -> fail x2" in r for r in result["regression_reasons"])
    assert "fail x2" in done.stdout and "regression: tiny_sum x chrome" in done.stdout
    facts = {d["fact"] for d in result["provenance_differences"]}
    assert "corpus_sha256" in facts  # the task file changed, and compare says so first
    sum_group = next(g for g in result["groups"] if g["task"] == "tiny_sum")
    assert sum_group["ratio"] is None and "no successful attempt in NEW" in sum_group["note"]
    mul_group = next(g for g in result["groups"] if g["task"] == "tiny_mul")
    assert mul_group["base_status"] == mul_group["new_status"] == "pass"
    # without the flag the same comparison reports and exits 0
    assert cli("compare", str(base), str(new)).returncode == 0


def test_resource_metrics_of_profiled_runs_are_comparable(tmp_path: Path) -> None:
    """Profiled browser rows (the recorded row shape) compare on a resource metric."""
    import synthetic_runs as synthetic
    from metewand.compare.run_compare import compare_runs
    from metewand.compare.rundir import load_run

    base = synthetic.write_browser_run(tmp_path / "a", n_tasks=6, k=5, seed=1)
    same = synthetic.write_browser_run(tmp_path / "b", n_tasks=6, k=5, seed=1)
    result = compare_runs(load_run(base), load_run(same), metric="pss_peak_bytes")
    assert result["metric"] == "pss_peak_bytes" and len(result["groups"]) == 12
    measured = [g for g in result["groups"] if g["ratio"] is not None]
    assert measured and all(g["ratio"] == 1.0 for g in measured)
    for group in measured:  # some tasks have fewer than 5 passing attempts: too few to judge
        if group["units"][0] >= 5:
            assert group["verdict"] == "no change", group
        else:
            assert group["verdict"] == "not comparable", group
            assert group["verdict_reason"] == f"n={group['units'][0]} < 5"
    assert result["regression"] is False


def test_two_engines_of_one_run_are_compared_from_paired_rounds(tmp_path: Path) -> None:
    """--ab-engines A,B: per task, the k-th attempts of both engines (one round) make a pair."""
    corpus = tiny_corpus(
        tmp_path / "corpus",
        {"sum.json": _task("tiny_sum", "1+1", 2), "mul.json": _task("tiny_mul", "2*3", 6)},
    )
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "chrome,lightpanda",
        "--k",
        "5",
        "--out",
        str(tmp_path / "runs"),
        "--run-id",
        "two",
        "--no-progress",
        "--host-telemetry",
        "off",
    )
    assert done.returncode in (0, 1), done.stderr
    run = tmp_path / "runs" / "two"
    compared = cli("compare", "--ab-engines", "chrome,lightpanda", str(run), "--json")
    assert compared.returncode == 0, compared.stderr
    result = canonical.loads(compared.stdout.encode())
    assert schemas.violations("metewand_compare-2", result) == []
    assert result["design"] == "paired_engines" and result["group_names"] == ["task", "engines"]
    rows = [canonical.loads(line) for line in (run / "results.jsonl").read_bytes().splitlines()]
    for group in result["groups"]:
        assert group["engines"] == "lightpanda vs chrome" and group["test"] == "signed_rank"
        passed = {
            engine: {
                r["attempt"]
                for r in rows
                if r["task_id"] == group["task"] and r["engine"] == engine and r["status"] == "pass"
            }
            for engine in ("chrome", "lightpanda")
        }
        assert group["pairs"] == len(passed["chrome"] & passed["lightpanda"])
    bad = cli("compare", "--ab-engines", "chrome,moli", str(run))
    assert bad.returncode == 2 and "no attempt of moli" in bad.stderr
