"""scores.json: attempt rates, the all-k task rule, counts, byte-identical regeneration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

import synthetic_runs as synthetic
from metewand import canonical
from metewand.cli.main import cli
from metewand.compare.scorecard import browser_scorecard, compute_scorecard
from metewand.compare.scores import browser_scores, compute_scores, scores_bytes


def _row(
    task: str, engine: str, attempt: int, status: str, subset: str = "l1.raw_cdp"
) -> dict[str, Any]:
    return {
        "key": f"l1/{subset}/{task}/{engine}/{attempt}",
        "layer": "l1",
        "subset": subset,
        "task_id": task,
        "engine": engine,
        "attempt": attempt,
        "status": status,
    }


def test_all_k_rule_and_counts() -> None:
    rows = [
        _row("a", "chrome", 0, "pass"),
        _row("a", "chrome", 1, "pass"),
        _row("a", "chrome", 2, "pass"),
        _row("b", "chrome", 0, "pass"),
        _row("b", "chrome", 1, "timeout"),
        _row("b", "chrome", 2, "pass"),
        _row("c", "chrome", 0, "pass"),  # only 1 of 3 attempts recorded: incomplete
        _row("a", "lightpanda", 0, "unsupported", "l2.web"),
    ]
    scores = browser_scores(rows, {"k": 3, "selected_engines": ["chrome", "lightpanda", "moli"]})
    chrome = scores["by_engine"]["chrome"]
    assert chrome["attempts"]["passed"] == 6 and chrome["attempts"]["total"] == 7
    assert chrome["attempts"]["by_status"]["timeout"] == 1
    assert chrome["tasks"] == {"passed": 1, "total": 3, "incomplete": 1, "rate": round(1 / 3, 6)}
    assert scores["engines"] == ["chrome", "lightpanda", "moli"]
    moli = scores["by_engine"]["moli"]
    assert moli["attempts"]["total"] == 0 and moli["attempts"]["rate"] is None
    lp = scores["by_engine_subset"]["lightpanda"]["l2.web"]
    assert lp["attempts"]["by_status"]["unsupported"] == 1 and lp["tasks"]["passed"] == 0
    card = browser_scorecard(scores)
    assert "33.3% (1/3)" in card and "unavailable (no attempts)" in card


def test_row_order_does_not_change_bytes() -> None:
    rows = [
        _row(t, e, a, s) for t in "xyz" for e in ("c", "l") for a, s in enumerate(["pass", "fail"])
    ]
    forward = scores_bytes(browser_scores(rows, {"k": 2}))
    backward = scores_bytes(browser_scores(list(reversed(rows)), {"k": 2}))
    assert forward == backward
    assert canonical.loads(forward)["by_engine"]["c"]["tasks"]["passed"] == 0


def test_compute_scores_count_outcomes_and_codes(tmp_path: Path) -> None:
    run = synthetic.write_compute_run(tmp_path / "c1", attempts=10)
    from metewand.compare.rundir import load_run

    data = load_run(run)
    scores = compute_scores(data.rows, data.manifest)
    for block in scores["by_implementation"].values():
        assert block["total"] == 10
        assert block["accepted"] + block["by_outcome"].get("failed", 0) == 10
        assert sum(block["diagnostics"].values()) == block["by_outcome"].get("failed", 0)


def test_regeneration_is_byte_identical(tmp_path: Path) -> None:
    """Acceptance 3: `metewand report` twice gives the same scores.json and scorecard.md."""
    run = synthetic.write_browser_run(tmp_path / "run1", n_tasks=8, k=3)
    runner = CliRunner()
    first = runner.invoke(cli, ["report", str(run), "--format", "md,json,csv"])
    assert first.exit_code == 0, first.output
    before = {n: (run / n).read_bytes() for n in ("scores.json", "scorecard.md", "results.csv")}
    for name in before:
        (run / name).unlink()
    second = runner.invoke(cli, ["report", str(run), "--format", "md,json,csv"])
    assert second.exit_code == 0, second.output
    after = {n: (run / n).read_bytes() for n in before}
    assert before == after
    scores = canonical.loads(before["scores.json"])
    assert scores["rows"] == 8 * 3 * 2
    assert before["scores.json"] == canonical.dumps(scores) + b"\n"


def test_report_rejects_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 2


def test_compute_outcome_counts_are_per_case_and_implementation(tmp_path: Path) -> None:
    """The outcome block is per case x implementation like every other table (issue 13)."""
    run = synthetic.write_compute_run(tmp_path / "c3", attempts=6, warmups=2, cases=3)
    from metewand.compare.rundir import load_run
    from metewand.runtime import schemas

    data = load_run(run)
    scores = compute_scores(data.rows, data.manifest)
    assert schemas.violations("metewand_compute_cases-1", scores["cases"]) == []
    per_case: dict[str, int] = {}
    for case in scores["cases"]["cases"]:
        assert sorted(case["implementations"]) == ["numpy", "python"]
        for name, block in case["implementations"].items():
            assert block["attempts"] == 6 and sum(block["by_outcome"].values()) == 6
            assert block["accepted"] == block["by_outcome"].get("accepted", 0)
            assert block["warmups"]["total"] == 2  # counted in their own case, never timed
            per_case[name] = per_case.get(name, 0) + block["attempts"]
    # the cases partition the run: their counts add up to the whole, none counted twice
    assert per_case == {n: b["total"] for n, b in scores["by_implementation"].items()}
    card = compute_scorecard(scores)
    assert "## Outcomes per case × implementation" in card and "all cases" not in card
    outcome_lines = card.split("## Outcomes per case × implementation")[1].split("\n\n")[1]
    assert len(outcome_lines.splitlines()) == 2 + 3 * 2  # header, rule, 3 cases x 2 impls
    runner = CliRunner()
    done = runner.invoke(cli, ["report", str(run), "--format", "html"])
    assert done.exit_code == 0, done.output
    html = (run / "report.html").read_text()
    outcomes = html.split('id="scores"')[1].split("</section>")[0]
    assert "<th>case</th>" in outcomes and outcomes.count("<tr>") == 1 + 3 * 2
