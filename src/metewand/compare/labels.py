"""What names a compute case and an implementation, and which metrics a case reports: the
labels ``compare`` prints and ``history`` groups by, apart from the statistics in ``cases``
(no numpy, so ``history add`` does not load it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metewand.compare import compute_rows

CASE_METRICS = (
    "timed_wall_time_ns",
    "cpu_time_ns",
    "peak_rss_bytes",
    "materialization_time_ns",
    "worker_startup_time_ns",
    "prepare_time_ns",
    "execute_request_time_ns",
    "evaluation_time_ns",
)


def _params_text(params: Any) -> str:
    if not isinstance(params, Mapping) or not params:
        return ""
    return ", ".join(f"{k}={params[k]}" for k in sorted(params))


def case_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The case coordinates of one attempt row (what makes two attempts comparable)."""
    return {
        "experiment": row.get("experiment"),
        "case": row.get("case"),
        "dataset": row.get("dataset"),
        "dataset_parameters": row.get("dataset_parameters") or {},
        "problem": row.get("problem"),
        "problem_parameters": row.get("problem_parameters") or {},
        "timing_scope": row.get("timing_scope"),
    }


def case_label(case: Mapping[str, Any]) -> str:
    """``scaling/default: integers(distribution=uniform, size=2000) sort [prepare_and_execute]``."""
    dataset = f"{case['dataset']}({_params_text(case['dataset_parameters'])})"
    problem = str(case["problem"])
    if case["problem_parameters"]:
        problem += f"({_params_text(case['problem_parameters'])})"
    return f"{case['experiment']}/{case['case']}: {dataset} {problem} [{case['timing_scope']}]"


def implementation_label(row: Mapping[str, Any], side: bool = True) -> str:
    """The implementation name, with its parameters when it has any, and in an interleaved A/B
    run the side it ran from (``heapsort [base]``) unless ``side`` is False."""
    name = compute_rows.implementation_of(row)
    params = row.get("implementation_parameters")
    label = f"{name}({_params_text(params)})" if isinstance(params, Mapping) and params else name
    ab = compute_rows.ab_of(row) if side else None
    return f"{label} [{ab[0]}]" if ab else label
