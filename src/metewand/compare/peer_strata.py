"""The peer's ``stratified`` block of ``resource_summary.json``: the all-pass intersection split
by driver, task family, layer and subset, with the peer's eleven metrics per engine in each
stratum (median, p95, 95% CI of the median by the same task-clustered bootstrap as the rest of
the summary).

Strata come from the rows: ``driver``, ``family`` (a task file's ``family`` field, else
``unclassified``, as the peer labels tasks without one), ``layer`` and ``subset_id``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from metewand.compare import stats
from metewand.compare.intersection import Intersection

Row = Mapping[str, Any]
# the metrics the peer reports per stratum, in its names
PEER_METRICS = (
    "avg_cores",
    "cpu_system_ms",
    "cpu_total_ms",
    "cpu_user_ms",
    "fixture_app_rx_body_bytes",
    "fixture_app_tx_body_bytes",
    "process_count_peak",
    "pss_baseline_bytes",
    "pss_end_bytes",
    "pss_peak_bytes",
    "pss_peak_delta_bytes",
)
DIMENSIONS = {
    "driver": lambda row: row.get("driver"),
    "family": lambda row: row.get("family") or "unclassified",
    "layer": lambda row: row.get("layer"),
    "subset": lambda row: row.get("subset_id") or row.get("subset"),
}


def _metrics(
    values: Mapping[str, Sequence[float | None]],
    tasks: Sequence[str],
    picks: Sequence[int],
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    out = {}
    for name in PEER_METRICS:
        column = values.get(name) or []
        present = [
            (column[i], tasks[i]) for i in picks if i < len(column) and column[i] is not None
        ]
        out[name] = stats.describe(
            [float(v) for v, _ in present if v is not None],
            [t for _, t in present],
            resamples,
            seed,
        )
    return out


def stratified(
    inter: Intersection,
    resamples: int,
    seed: int,
    whole: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Every engine's intersection rows are in the same key order, so the strata found on the
    first engine's rows pick the same task-attempts in every engine.

    ``whole``: each engine's metrics over the whole intersection, reused for a stratum that is
    the whole intersection. A stratum met again in another dimension (a subset that is also a
    layer and a driver) is described once: the bootstrap is the cost here."""
    engines = [e for e in inter.engines if inter.rows_by_engine.get(e)]
    if not engines:
        return {name: {} for name in DIMENSIONS}
    first = inter.rows_by_engine[engines[0]]
    columns = {e: inter.metric_columns(e) for e in engines}
    tasks = {e: [str(r["task_id"]) for r in inter.rows_by_engine[e]] for e in engines}
    described: dict[tuple[int, ...], dict[str, Any]] = {}

    def by_engine(picks: list[int]) -> dict[str, Any]:
        key = tuple(picks)
        if key not in described:
            if whole is not None and len(picks) == len(first):
                described[key] = {
                    e: {"metrics": {m: whole[e][m] for m in PEER_METRICS}} for e in engines
                }
            else:
                described[key] = {
                    e: {"metrics": _metrics(columns[e], tasks[e], picks, resamples, seed)}
                    for e in engines
                }
        return described[key]

    out: dict[str, Any] = {}
    for dimension, value_of in DIMENSIONS.items():
        groups: dict[str, list[int]] = defaultdict(list)
        for index, row in enumerate(first):
            groups[str(value_of(row))].append(index)
        out[dimension] = {
            value: {"intersection_attempts": len(picks), "by_engine": by_engine(picks)}
            for value, picks in sorted(groups.items())
        }
    return out
