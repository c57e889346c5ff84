"""A run's verdict in a few lines: the question it asks, the answer with its key figures and CIs,
whether the comparison is eligible (the failed conditions in words), the failures grouped by
cause, and where the full report is. ``metewand demo`` ends with one block per suite.

Every figure comes from the run directory (its rows, host summary and, for a profiled browser
run, the resource summary its report wrote), as the reports' figures do; nothing is computed that
a report does not also show.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metewand.compare.html_parts import bullet_list, esc
from metewand.compare.run_facts import read_facts
from metewand.compare.rundir import RunData
from metewand.compare.scores import compute_scores
from metewand.compare.suite_registry import suite_kind
from metewand.runtime import rundir

DETAIL_CHARS = 90  # one example detail per failure group, cut to this
# What a failure class means, for a reader who has not read docs/DESIGN.md.
CLASS_WORDS = {
    "cdp_semantic": "the engine answered, but not as the task expects",
    "engine_unsupported": "the engine lacks a CDP method the task needs",
    "script_error": "the task's own script failed",
    "infra": "harness or host trouble, not the engine's verdict",
    "driver_unavailable": "the driver path is not installed here",
}


@dataclass
class Verdict:
    title: str
    question: str
    answer: list[str]
    eligible: bool | None  # None: the suite has no eligibility rule for this run
    failed_conditions: list[str]
    failures: list[str]  # one line per cause, largest first
    failed_attempts: int
    attempts: int
    reports: list[Path] = field(default_factory=list)


def _ci(block: Sequence[float] | None, digits: int) -> str:
    if not block or None in block:
        return "CI unavailable"
    return f"95% CI {block[0]:.{digits}f}-{block[1]:.{digits}f}"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def _gate_words(host_summary: Mapping[str, Any] | None) -> list[str]:
    """The host pollution gate's tripped conditions as its own details say them."""
    gate = (host_summary or {}).get("gate")
    if not isinstance(gate, Mapping):
        return ["host telemetry missing: the host pollution gate could not be judged"]
    if gate.get("passed") is not False:
        return []
    details = [str(t.get("detail") or t.get("condition")) for t in gate.get("triggered", [])]
    return ["host was busy (pollution gate): " + ("; ".join(details) or "no samples")]


# Eligibility conditions (compare.eligibility) in a reader's words; the reason gives the figures.
CONDITION_WORDS = {
    "engines": "engines",
    "profile_jobs_k": "run settings",
    "independent_balanced": "engine order",
    "intersection_nonempty": "no common work",
    "metrics_complete": "metrics missing",
    "calibration": "the profiler's own cost (on/off calibration) is too high or unknown",
    "one_host": "rows from several hosts",
}


def _failed_conditions(
    summary: Mapping[str, Any], host_summary: Mapping[str, Any] | None
) -> list[str]:
    failed = []
    for condition in summary.get("eligibility_conditions") or []:
        if condition.get("passed"):
            continue
        if condition.get("id") == "host_gate":
            failed += _gate_words(host_summary) or [str(condition.get("reason"))]
            continue
        words = CONDITION_WORDS.get(str(condition.get("id")), str(condition.get("title")))
        failed.append(f"{words}: {condition.get('reason')}")
    return failed


def _reports(run: RunData) -> list[Path]:
    names = (rundir.REPORT, rundir.SCORECARD, rundir.RESOURCE_CARD)
    return [run.path / name for name in names if (run.path / name).is_file()]


# ---- browser -------------------------------------------------------------------------------


def _browser_cause(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, cause, detail): the failure class or status, the reason's leading phrase, the rest."""
    reason = str(row.get("reason") or row.get("unsupported_reason") or "")
    cause, _, detail = reason.partition(":")
    kind = str(row.get("failure_class") or row.get("status"))
    return kind, cause.strip() or str(row.get("status")), detail.strip()


def browser_failures(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("status") != "pass":
            kind, cause, _ = _browser_cause(row)
            groups.setdefault((str(row.get("engine")), kind, cause), []).append(row)
    lines = []
    for (engine, kind, cause), members in sorted(groups.items(), key=lambda g: -len(g[1])):
        tasks = Counter(str(r.get("task_id")) for r in members)
        named = ", ".join(f"{t} x{n}" for t, n in sorted(tasks.items()))
        words = f" ({CLASS_WORDS[kind]})" if kind in CLASS_WORDS else ""
        detail = _browser_cause(members[0])[2]  # one example: a cause's details differ by task
        example = f' — e.g. {members[0].get("task_id")}: "{_cut(detail)}"' if detail else ""
        lines.append(f"{engine}: {len(members)} {kind}{words}: {cause} on {named}{example}")
    return lines


def _pass_counts(rows: Sequence[Mapping[str, Any]], engines: Sequence[str]) -> str:
    parts = []
    for engine in engines:
        mine = [r for r in rows if r.get("engine") == engine]
        passed = sum(1 for r in mine if r.get("status") == "pass")
        tasks = {r.get("task_id") for r in mine}
        parts.append(f"{engine} passed {passed} of {len(mine)} attempts ({len(tasks)} tasks)")
    return "; ".join(parts) + "."


def _cost_sentence(summary: Mapping[str, Any]) -> str:
    """The reference engine against each other engine, on the all-pass intersection."""
    inter = summary.get("all_pass_intersection") or {}
    if not inter.get("attempts"):
        return "No task-attempt was passed by every engine, so their costs are not compared."
    reference = str(summary.get("reference_engine"))
    by_engine = summary.get("by_engine") or {}
    sentences = []
    for engine, ratios in sorted((summary.get("paired_vs_reference") or {}).items()):
        parts = []
        for metric, label, scale, unit in (
            ("cpu_total_ms", "CPU", 1.0, "ms"),
            ("pss_peak_bytes", "peak PSS", 2**20, "MiB"),
        ):
            ratio = (ratios or {}).get(metric) or {}
            mine = ((by_engine.get(engine) or {}).get("metrics") or {}).get(metric) or {}
            theirs = ((by_engine.get(reference) or {}).get("metrics") or {}).get(metric) or {}
            if ratio.get("median_ratio") is None or mine.get("median") is None:
                parts.append(f"{label} not compared")
                continue
            parts.append(
                f"{label} {mine['median'] / scale:,.1f} {unit} vs {theirs['median'] / scale:,.1f} "
                f"{unit} per attempt, {ratio['median_ratio']:.3f}x {reference}'s "
                f"({_ci(ratio.get('median_ratio_ci95'), 3)})"
            )
        sentences.append(f"{engine}: " + "; ".join(parts) + ".")
    head = (
        f"On the {inter['attempts']} task-attempts every engine passed "
        f"({inter.get('tasks')} tasks), medians: "
    )
    return head + " ".join(sentences)


def browser_verdict(run: RunData, summary: Mapping[str, Any] | None = None) -> Verdict:
    """``summary``: a regenerated resource summary (another baseline) instead of the run's own."""
    rows = [r for r in run.rows if r.get("score_included", True) is not False]
    engines = read_facts(run.manifest).engines or sorted({str(r.get("engine")) for r in rows})
    summary = summary or run.resource_summary
    answer = []
    if summary:
        answer.append(_cost_sentence(summary))
        eligible: bool | None = bool(summary.get("resource_comparison_eligible"))
        failed = _failed_conditions(summary, run.host_summary)
    else:
        answer.append("Functional run only (no resource profile): costs were not measured.")
        eligible, failed = None, _gate_words(run.host_summary)
    answer.append(_pass_counts(rows, engines))
    failures = browser_failures(rows)
    return Verdict(
        title=f"browser engines {', '.join(engines)} (run {run.run_id})",
        question="On the same tasks, which does each engine pass, and what does each cost in CPU "
        "and memory where all of them pass?",
        answer=answer,
        eligible=eligible,
        failed_conditions=failed,
        failures=failures,
        failed_attempts=sum(1 for r in rows if r.get("status") != "pass"),
        attempts=len(rows),
        reports=_reports(run),
    )


# ---- compute -------------------------------------------------------------------------------


def compute_failures(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("status") != "accepted":
            key = (str(row.get("implementation")), str(row.get("code") or row.get("status")))
            groups.setdefault(key, []).append(row)
    lines = []
    for (implementation, code), members in sorted(groups.items(), key=lambda g: -len(g[1])):
        message = str(members[0].get("message") or "")
        lines.append(
            f"{implementation}: {len(members)} {code}"
            + (f' — "{_cut(message)}"' if message else "")
        )
    return lines


def _fastest(cases: Sequence[Mapping[str, Any]]) -> str:
    wins: Counter[str] = Counter()
    for case in cases:
        medians = {
            name: block["metrics"]["timed_wall_time_ns"]["median"]
            for name, block in case["implementations"].items()
            if (block.get("metrics") or {}).get("timed_wall_time_ns", {}).get("median") is not None
        }
        if medians:
            wins[min(medians, key=lambda n: medians[n])] += 1
    if not wins:
        return "No case has an accepted attempt."
    ranked = ", ".join(f"{name} in {n}" for name, n in wins.most_common())
    return f"Fastest median timed wall per case: {ranked} of {len(cases)} cases."


def _ratio_sentence(stats: Mapping[str, Any]) -> str | None:
    reference, means = stats.get("reference"), stats.get("geometric_mean_ratio") or {}
    parts = []
    for name, block in sorted(means.items()):
        if block and block.get("geometric_mean") is not None:
            parts.append(f"{name} {block['geometric_mean']:.2f}x ({_ci(block.get('ci95'), 2)})")
        else:
            parts.append(f"{name} not comparable (no accepted attempt in some case)")
    if not reference or not parts:
        return None
    return (
        f"Timed wall against {reference} (geometric mean over the cases of each case's "
        "ratio of trimmed geometric means): " + "; ".join(parts) + "."
    )


def _compute_conditions(run: RunData, stats: Mapping[str, Any]) -> list[str]:
    """What would make the figures unfair: an implementation missing from a case, a busy host."""
    failed = []
    names = set(stats.get("implementations") or [])
    for case in stats.get("cases") or []:
        missing = sorted(
            name for name in names if not (case["implementations"].get(name) or {}).get("accepted")
        )
        if missing:
            failed.append(f"no accepted attempt of {', '.join(missing)} in case {case['case']}")
    return failed + _gate_words(run.host_summary)


def compute_verdict(run: RunData, scores: Mapping[str, Any] | None = None) -> Verdict:
    """``scores``: the run's scores when the caller has them (a report), else computed here."""
    scores = scores or compute_scores(run.rows, run.manifest, None)
    stats = scores.get("cases") or {}
    measured = [r for r in run.rows if r.get("role") != "warmup"]
    answer = [line for line in (_ratio_sentence(stats), _fastest(stats.get("cases") or [])) if line]
    failed = _compute_conditions(run, stats)
    name = run.manifest.get("name") or run.manifest.get("benchmark") or "compute"
    return Verdict(
        title=f"compute example {name} (run {run.run_id})",
        question="Which implementation is fastest, case by case, and by how much against the "
        "reference?",
        answer=answer,
        eligible=not failed,
        failed_conditions=failed,
        failures=compute_failures(measured),
        failed_attempts=sum(1 for r in measured if r.get("status") != "accepted"),
        attempts=len(measured),
        reports=_reports(run),
    )


def verdict_of(
    run: RunData,
    scores: Mapping[str, Any] | None = None,
    summary: Mapping[str, Any] | None = None,
) -> Verdict | None:
    """The suite's verdict of ``run`` (the suite kind says how), None for a suite without one."""
    make = suite_kind(run.kind).verdict_of
    return make(run, scores, summary) if make is not None else None


def render(verdict: Verdict) -> list[str]:
    """The block as plain lines (no colour, no table: it must read the same in a CI log)."""
    lines = [f"verdict: {verdict.title}", f"  question: {verdict.question}"]
    lines += [f"  answer:   {line}" for line in verdict.answer]
    if verdict.eligible is None:
        lines.append("  eligible: not judged (no resource profile)")
    else:
        lines.append(f"  eligible: {'yes' if verdict.eligible else 'no'}")
    lines += [f"    - {condition}" for condition in verdict.failed_conditions]
    if verdict.failed_attempts:
        lines.append(
            f"  failures: {verdict.failed_attempts} of {verdict.attempts} attempts, by cause:"
        )
        lines += [f"    - {line}" for line in verdict.failures]
    else:
        lines.append(f"  failures: none ({verdict.attempts} attempts)")
    lines += [f"  report:   {path}" for path in verdict.reports]
    return lines


def html_block(verdict: Verdict | None) -> str:
    """The same verdict at the top of report.html (the reports' paths are left out: it is one)."""
    if verdict is None:
        return ""
    if verdict.eligible is None:
        eligible = "not judged (no resource profile)"
    else:
        eligible = "yes" if verdict.eligible else "no"
    parts = [
        f"<p><b>Question:</b> {esc(verdict.question)}</p>",
        "<p><b>Answer:</b></p>",
        bullet_list(verdict.answer),
        f"<p><b>Eligible:</b> {esc(eligible)}</p>",
    ]
    if verdict.failed_conditions:
        parts.append(bullet_list(verdict.failed_conditions))
    if verdict.failed_attempts:
        parts += [
            f"<p><b>Failures:</b> {verdict.failed_attempts} of {verdict.attempts} attempts, "
            "by cause:</p>",
            bullet_list(verdict.failures),
        ]
    else:
        parts.append(f"<p><b>Failures:</b> none ({verdict.attempts} attempts)</p>")
    return f'<div class="verdict" id="verdict">{"".join(parts)}</div>'
