"""scorecard.md: the scores.json numbers as a Markdown page, counts beside every rate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metewand import markdown
from metewand.compare import browser_phases, phase_costs
from metewand.compare.case_text import OUTCOME_HEADER, cases_markdown, outcome_rows
from metewand.compare.driver_costs import DRIVER_NOTE, TABLE_HEAD, table_rows
from metewand.compare.fmt import rate_text
from metewand.suites.browser.statuses import STATUSES


def _rate_cells(block: Mapping[str, Any]) -> list[str]:
    att, tasks = block["attempts"], block["tasks"]
    statuses = ", ".join(f"{s} {n}" for s, n in att["by_status"].items() if n)
    return [
        rate_text(tasks["passed"], tasks["total"], tasks["rate"]),
        str(tasks["incomplete"]),
        rate_text(att["passed"], att["total"], att["rate"]),
        statuses or "none",
    ]


GRADING = {
    "independent": "every declared check must pass",
    "peer-compatible": "L1 server-graded rows by the server's verdict alone, as the peer grades them",
}


def browser_scorecard(scores: Mapping[str, Any]) -> str:
    head = ["engine", "tasks passed (all-k)", "incomplete", "attempts passed", "statuses"]
    lines = [
        f"# Scorecard: run {scores['run_id']}",
        "",
        f"k = {scores['k']}; {scores['task_rule']}. Rows: {scores['rows']}.",
        f"Score mode: {scores.get('score_mode', 'independent')} ({GRADING.get(str(scores.get('score_mode')), GRADING['independent'])}).",
        f"Statuses: {', '.join(STATUSES)}.",
        "",
        "## Per engine",
        "",
    ]
    lines += markdown.table(head, [[e, *_rate_cells(b)] for e, b in scores["by_engine"].items()])
    for title, key, label in (
        ("Per layer", "by_engine_layer", "layer"),
        ("Per subset", "by_engine_subset", "subset"),
    ):
        lines += ["", f"## {title}", ""]
        rows = [
            [engine, name, *_rate_cells(block)]
            for engine, groups in scores[key].items()
            for name, block in groups.items()
        ]
        lines += markdown.table(["engine", label, *head[1:]], rows)
    if scores.get("by_driver_engine"):
        lines += ["", "## Per driver path", "", DRIVER_NOTE, ""]
        lines += markdown.table(TABLE_HEAD, table_rows(scores["by_driver_engine"]))
    if scores.get("phase_costs"):
        lines += _browser_phases(scores)
    return "\n".join(lines) + "\n"


BROWSER_PHASES_NOTE = (
    "Passing attempts. engine: the engine's accounting group; harness: this process (CDP "
    "client, driver, grader, fixture server). Median wall and CPU per phase; the share is the "
    "phase's CPU over the scope's total, both summed over the attempts, so a scope's phases and "
    "the CPU between marks add up to 100%. A driver path's adapter runs as one phase."
)


def _browser_phases(scores: Mapping[str, Any]) -> list[str]:
    top = scores.get("phase_top_steps") or {}
    lines = ["", "## Top steps by engine CPU", ""]
    lines += [f"- {line}" for line in browser_phases.top_sentences(top)]
    lines += [""] + markdown.table(list(browser_phases.TOP_HEADER), browser_phases.top_rows(top))
    lines += ["", "## Where the time and CPU go", "", BROWSER_PHASES_NOTE, ""]
    costs = scores["phase_costs"]
    lines += markdown.table(list(browser_phases.TABLE_HEADER), phase_costs.table_rows(costs))
    return lines


PHASES_NOTE = (
    "Measured accepted attempts. Each group is one accounting group: the implementation's "
    "worker tree, the evaluator's. Median wall and median CPU per phase; the share is the "
    "phase's CPU over the group's total, both summed over the attempts, so a group's phases "
    "and the CPU between marks add up to 100%."
)


def compute_scorecard(scores: Mapping[str, Any]) -> str:
    lines = [
        f"# Scorecard: run {scores['run_id']}",
        "",
        f"Rows: {scores['rows']} ({scores['measured_rows']} measured, "
        f"{scores['warmup_rows']} warm-up; warm-ups enter no rate).",
        "",
    ]
    if scores.get("cases"):  # outcome counts per case x implementation, never summed over cases
        lines += ["## Outcomes per case × implementation", ""]
        rows = [[str(cell) for cell in row] for row in outcome_rows(scores["cases"])]
        lines += markdown.table(list(OUTCOME_HEADER), rows)
        lines += ["", *cases_markdown(scores["cases"])]
    if scores.get("phase_costs"):
        lines += [
            "",
            "## Where the time and CPU go (per case × implementation)",
            "",
            PHASES_NOTE,
            "",
        ]
        lines += markdown.table(
            list(phase_costs.TABLE_HEADER), phase_costs.table_rows(scores["phase_costs"])
        )
    return "\n".join(lines) + "\n"
