"""The verdict block ``metewand demo`` ends with: the answer's figures are the reports' figures,
every failed attempt is counted in exactly one cause, failed conditions are said in words."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import synthetic_runs as synthetic
from metewand.compare.generate import generate
from metewand.compare.rundir import load_run
from metewand.compare.verdict import render, verdict_of


def _counted(lines: list[str]) -> int:
    return sum(int(re.match(r"\S+: (\d+) ", line).group(1)) for line in lines)  # type: ignore[union-attr]


def test_compute_verdict_groups_failures_and_quotes_the_geometric_means(tmp_path: Path) -> None:
    run_dir = synthetic.write_compute_run(tmp_path / "c", attempts=8, cases=2)
    generate(run_dir, ("json",))
    verdict = verdict_of(load_run(run_dir))
    assert verdict is not None
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    failed = Counter(r["implementation"] for r in rows if r["status"] != "accepted")
    assert verdict.failed_attempts == sum(failed.values()) > 0 and verdict.attempts == len(rows)
    assert _counted(verdict.failures) == sum(failed.values())
    for name, count in failed.items():
        assert f'{name}: {count} result_invalid — "synthetic invalid result"' in verdict.failures
    text = "\n".join(render(verdict))
    assert "question: Which implementation is fastest" in text
    assert "Fastest median timed wall per case: " in text and "of 2 cases." in text
    # no host telemetry was written: the condition is said, not passed silently
    assert verdict.eligible is False
    assert "host telemetry missing" in text
    assert f"failures: {sum(failed.values())} of {len(rows)} attempts, by cause:" in text


def test_browser_verdict_quotes_the_resource_summary_and_each_cause(tmp_path: Path) -> None:
    run_dir = synthetic.write_browser_run(tmp_path / "b", n_tasks=6, k=5)
    generate(run_dir, ("json",), reference_engine="chrome")
    summary = json.loads((run_dir / "resource_summary.json").read_text())
    verdict = verdict_of(load_run(run_dir))
    assert verdict is not None
    text = "\n".join(render(verdict))
    ratio = summary["paired_vs_reference"]["lightpanda"]["cpu_total_ms"]
    low, high = ratio["median_ratio_ci95"]
    assert f"{ratio['median_ratio']:.3f}x chrome's (95% CI {low:.3f}-{high:.3f})" in text
    inter = summary["all_pass_intersection"]
    assert f"On the {inter['attempts']} task-attempts every engine passed" in text
    assert verdict.eligible is summary["resource_comparison_eligible"]
    failed_conditions = [c for c in summary["eligibility_conditions"] if not c["passed"]]
    assert len(verdict.failed_conditions) >= len(failed_conditions) > 0
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    not_passed = [r for r in rows if r["status"] != "pass"]
    assert verdict.failed_attempts == len(not_passed) and _counted(verdict.failures) == len(
        not_passed
    )
    assert verdict.reports and all(path.is_file() for path in verdict.reports)
