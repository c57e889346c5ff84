"""Statistics for resource comparisons: medians, p95, task-clustered bootstrap, paired ratios.

Why a cluster bootstrap: the k attempts of one task are not independent draws (same page,
same steps, same engine state), and tasks differ in size by orders of magnitude. Resampling
attempts as if i.i.d. (what the peer benchmark did) gives intervals that are too narrow.
Resampling TASKS with replacement and taking all attempts of each chosen task keeps the
within-task correlation and gives honest intervals for "a task drawn from this corpus".

Paired ratio of an engine against a reference engine: for each task, the ratio of the engine's
median to the reference's median over the attempts both engines have; the summary is the
MEDIAN of those per-task ratios, with a cluster-bootstrap CI (tasks resampled). This is
scale-free (a 5 s task and a 50 ms task weigh the same), uses the pairing (task difficulty
cancels inside each ratio), and is robust to a few odd tasks. A ratio of pooled medians does
none of that: it compares two different "typical tasks" and ignores the pairing.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_BOOTSTRAP_SEED = 20240607
P95_METHOD = "linear"  # numpy's default (Hyndman-Fan type 7): interpolates between ranks
CI_LEVEL = 0.95
BOOTSTRAP_CHUNK_VALUES = 4_000_000  # running weights held at once (~32 MB of float64)
BOOTSTRAP_GRID_CELLS = 32  # cells that bracket each resample's middle ranks before the scan


def median(values: Sequence[float]) -> float | None:
    return float(np.median(np.asarray(values, dtype=float))) if len(values) else None


def p95(values: Sequence[float]) -> float | None:
    if not len(values):
        return None
    return float(np.percentile(np.asarray(values, dtype=float), 95.0, method="linear"))


def _group(values: Sequence[float], clusters: Sequence[Hashable]) -> list[np.ndarray]:
    """Values split by cluster, clusters in ``repr`` order, each keeping its row order.

    Only the distinct keys (a few thousand tasks) are sorted in Python; the values are grouped
    with one stable argsort, not appended one by one.
    """
    if len(values) != len(clusters):
        raise ValueError("values and clusters must have the same length")
    if not len(values):
        return []
    # sorted keys so the result does not depend on row order
    keys = sorted(dict.fromkeys(clusters), key=repr)
    index = {key: i for i, key in enumerate(keys)}
    cluster_ids = np.fromiter((index[c] for c in clusters), dtype=np.intp, count=len(clusters))
    order = np.argsort(cluster_ids, kind="stable")
    flat = np.asarray(values, dtype=float)[order]
    bounds = np.cumsum(np.bincount(cluster_ids, minlength=len(keys)))[:-1]
    return np.split(flat, bounds)


def cluster_bootstrap_median_ci(
    values: Sequence[float],
    clusters: Sequence[Hashable],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile 95% CI of the median, resampling clusters (tasks) with replacement."""
    groups = _group(values, clusters)
    if not groups:
        return None
    if len(groups) == 1 and len(groups[0]) == 1:
        only = float(groups[0][0])
        return (only, only)
    if np.isnan(np.concatenate(groups)).any():  # np.median's NaN rule: gather explicitly
        medians = _looped_resampled_medians(groups, _draw(len(groups), resamples, seed))
    else:
        counts = _resample_counts(len(groups), resamples, seed)
        columns = _resample_columns(len(groups), resamples, seed)
        medians = _weighted_medians(groups, counts, columns)
    low, high = np.percentile(medians, [2.5, 97.5])
    return (float(low), float(high))


def _draw(n_groups: int, resamples: int, seed: int) -> np.ndarray:
    """The clusters drawn for each resample: row b lists resample b's ``n_groups`` picks."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_groups, size=(resamples, n_groups))


@functools.lru_cache(maxsize=4)
def _resample_counts(n_groups: int, resamples: int, seed: int) -> np.ndarray:
    """How often each cluster is drawn in each resample (read-only, shared between metrics).

    The draws depend only on (clusters, resamples, seed), and a report bootstraps many metrics
    over the same task set, so the (resamples x clusters) matrix is built once.
    """
    counts = _counts_of(_draw(n_groups, resamples, seed), n_groups)
    counts.flags.writeable = False
    return counts


@functools.lru_cache(maxsize=4)
def _resample_columns(n_groups: int, resamples: int, seed: int) -> np.ndarray:
    """``_resample_counts`` as ``_narrow_columns_of`` lays it out, built once like it."""
    columns = _narrow_columns_of(_resample_counts(n_groups, resamples, seed))
    columns.flags.writeable = False
    return columns


def _narrow_columns_of(counts: np.ndarray) -> np.ndarray:
    """(clusters x resamples) small integers: the windowed scan gathers whole rows of it, which
    is several times cheaper than gathering float64 cells (the counts are exact either way)."""
    dtype = np.int16 if counts.shape[1] < 2**15 else np.int32  # a count is at most n_groups
    return np.ascontiguousarray(counts.T.astype(dtype))


def _counts_of(chosen: np.ndarray, n_groups: int) -> np.ndarray:
    rows = chosen.shape[0]
    flat = (chosen + np.arange(rows)[:, None] * n_groups).ravel()
    # float64: exact for these integer counts, and lets the grid step use a BLAS product
    return np.bincount(flat, minlength=rows * n_groups).reshape(rows, n_groups).astype(float)


def _resampled_medians(groups: list[np.ndarray], chosen: np.ndarray) -> np.ndarray:
    """Median of each resample; ``chosen[b]`` lists the clusters drawn for resample b."""
    return _weighted_medians(groups, _counts_of(chosen, len(groups)))


def _weighted_medians(
    groups: list[np.ndarray], counts: np.ndarray, columns: np.ndarray | None = None
) -> np.ndarray:
    """np.median of every resample without gathering it: a resample is a multiset of clusters.

    Resample b holds ``counts[b, g]`` copies of cluster g, so its median is a weighted median
    of the pooled values sorted once: the value at sorted position j has weight
    ``counts[b, cluster of j]``, and the k-th smallest element of the resample sits at the first
    j whose cumulative weight exceeds k. As np.median does, an even total averages the elements
    of ranks T/2 - 1 and T/2 (``(a + b) / 2``) and an odd total takes rank (T - 1)/2, so the
    results are bit-identical (up to the sign of a zero when -0.0 and 0.0 tie).

    Cumulative weights over all N positions for all B resamples would cost B x N; instead a
    grid of positions brackets every target rank exactly with one (B x G) @ (G x cells)
    product, and the running sums are taken only over the bracketed window of positions.
    ``columns`` is ``_narrow_columns_of(counts)`` when the caller has it cached.
    """
    if columns is None:
        columns = _narrow_columns_of(counts)
    flat = np.concatenate(groups)
    order = np.argsort(flat, kind="stable")
    values = flat[order]
    cluster_of = np.repeat(np.arange(len(groups)), [len(g) for g in groups])[order]
    totals = counts @ np.array([len(g) for g in groups], dtype=float)
    lower = np.floor((totals - 1) / 2)  # 0-based ranks of the middle elements
    upper = np.floor(totals / 2)
    positions = _grid_positions(len(values))
    grid_cum = counts @ _counts_before(cluster_of, len(groups), positions)
    cell_lower = (grid_cum[:, 1:] <= lower[:, None]).sum(axis=1)
    cell_upper = (grid_cum[:, 1:] <= upper[:, None]).sum(axis=1)
    low_at = np.empty(len(totals), dtype=np.intp)
    high_at = np.empty(len(totals), dtype=np.intp)
    by_cell = np.argsort(cell_lower, kind="stable")  # neighbours share narrow windows
    chunk = max(1, BOOTSTRAP_CHUNK_VALUES // len(values))
    for first in range(0, len(by_cell), chunk):
        rows = by_cell[first : first + chunk]
        start_cell, end_cell = int(cell_lower[rows].min()), int(cell_upper[rows].max()) + 1
        start, end = int(positions[start_cell]), int(positions[end_cell])
        # (window x rows): whole rows of ``columns`` are gathered, then the chunk's resamples
        weights = columns.take(cluster_of[start:end], axis=0).take(rows, axis=1)
        running = np.cumsum(weights, axis=0, dtype=np.int64)
        before = grid_cum[rows, start_cell]  # exact integers in float64, as are the ranks
        low_at[rows] = start + (running <= (lower[rows] - before)[None, :]).sum(axis=0)
        high_at[rows] = start + (running <= (upper[rows] - before)[None, :]).sum(axis=0)
    low, high = values[low_at], values[high_at]
    return np.where(totals % 2 == 0, (low + high) / 2, low)


def _grid_positions(n_values: int) -> np.ndarray:
    """Sorted positions 0 = p_0 < ... < p_cells = n_values that bound the bracketing cells."""
    cells = min(n_values, BOOTSTRAP_GRID_CELLS)
    return np.unique(np.linspace(0, n_values, cells + 1).round().astype(np.intp))


def _counts_before(cluster_of: np.ndarray, n_groups: int, positions: np.ndarray) -> np.ndarray:
    """(G x len(positions)): how many values of each cluster lie before each grid position."""
    cells = len(positions) - 1
    cell_of = np.searchsorted(positions, np.arange(len(cluster_of)), side="right") - 1
    per_cell = np.bincount(cluster_of * cells + cell_of, minlength=n_groups * cells)
    before = np.zeros((n_groups, cells + 1))
    before[:, 1:] = np.cumsum(per_cell.reshape(n_groups, cells), axis=1)
    return before


def _looped_resampled_medians(groups: list[np.ndarray], chosen: np.ndarray) -> np.ndarray:
    """The plain definition, one resample at a time (kept as the reference the tests use)."""
    medians = np.empty(chosen.shape[0])
    for b, row in enumerate(chosen):
        medians[b] = np.median(np.concatenate([groups[c] for c in row]))
    return medians


def bootstrap_record(resamples: int, seed: int, cluster: str = "task_id") -> dict[str, Any]:
    return {
        "method": "cluster_percentile",
        "cluster": cluster,
        "resamples": resamples,
        "seed": seed,
        "level": CI_LEVEL,
    }


def describe(
    values: Sequence[float],
    clusters: Sequence[Hashable],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """``{n, clusters, median, p95, median_ci95}`` for one metric of one engine."""
    ci = cluster_bootstrap_median_ci(values, clusters, resamples, seed)
    return {
        "n": len(values),
        "clusters": len(set(clusters)),
        "median": median(values),
        "p95": p95(values),
        "median_ci95": list(ci) if ci else None,
    }


def per_task_ratios(
    engine: Mapping[tuple[str, int], float],
    reference: Mapping[tuple[str, int], float],
) -> tuple[dict[str, float], list[str]]:
    """Per task: median(engine) / median(reference) over the (task, attempt) pairs both have.

    Returns the ratios and the tasks left out because the reference median is 0 (undefined).
    """
    paired: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for key in sorted(set(engine) & set(reference)):
        paired[key[0]][0].append(engine[key])
        paired[key[0]][1].append(reference[key])
    ratios: dict[str, float] = {}
    undefined: list[str] = []
    for task, (mine, theirs) in paired.items():
        denominator = float(np.median(theirs))
        if denominator == 0:
            undefined.append(task)
            continue
        ratios[task] = float(np.median(mine)) / denominator
    return ratios, undefined


def paired_ratio(
    engine: Mapping[tuple[str, int], float],
    reference: Mapping[tuple[str, int], float],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Median of per-task ratios (engine / reference) with a task-bootstrap 95% CI."""
    ratios, undefined = per_task_ratios(engine, reference)
    tasks = list(ratios)
    values = [ratios[t] for t in tasks]
    ci = cluster_bootstrap_median_ci(values, tasks, resamples, seed) if values else None
    return {
        "method": "median_of_per_task_median_ratios",
        "tasks": len(values),
        "pairs": len(set(engine) & set(reference)),
        "median_ratio": median(values),
        "median_ratio_ci95": list(ci) if ci else None,
        "undefined_tasks": len(undefined),
    }


def _finite(value: Any) -> float | None:
    """JSON has no NaN/Infinity: a non-finite figure is reported as None."""
    number = float(value)
    return number if np.isfinite(number) else None


def leak_slope(sequence_index: Sequence[float], values: Sequence[float]) -> dict[str, Any]:
    """Least-squares slope of ``values`` against the attempt sequence index (growth/attempt)."""
    n = len(values)
    if n != len(sequence_index):
        raise ValueError("sequence_index and values must have the same length")
    if n < 3 or len(set(sequence_index)) < 2:
        return {
            "n": n,
            "slope_per_attempt": None,
            "intercept": None,
            "stderr": None,
            "method": "ordinary_least_squares",
            "reason": "fewer than 3 points or a single sequence index",
        }
    x, y = np.asarray(sequence_index, float), np.asarray(values, float)
    slope, intercept, stderr = _ols(x, y)
    return {
        "n": n,
        "slope_per_attempt": _finite(slope),
        "intercept": _finite(intercept),
        "stderr": stderr,
        "method": "ordinary_least_squares",
        "reason": None,
    }


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float | None]:
    """Slope, intercept and the slope's standard error of y = a + b*x (n >= 3, x not constant).

    Plain numpy: the textbook closed form is one call's worth of scipy (a 100 MB dependency).
    """
    dx, dy = x - x.mean(), y - y.mean()
    sxx = float(dx @ dx)
    slope = float(dx @ dy) / sxx
    intercept = float(y.mean() - slope * x.mean())
    residuals = y - (intercept + slope * x)
    scale = float(np.abs(y).max()) or 1.0
    if np.allclose(residuals / scale, 0.0, atol=1e-12):
        return slope, intercept, 0.0  # an exact line (e.g. a constant process count)
    return slope, intercept, _finite(float(np.sqrt(residuals @ residuals / (len(x) - 2) / sxx)))


# ---- i.i.d. repetitions: the bootstrap of one case x implementation, or of one command ----
#
# Within one compute case (or one ``measure`` command) the repetitions are exchangeable draws,
# so each repetition is its own cluster. Drawing indices into the SORTED values makes the
# median of a resample the mean of its two middle drawn indices' values (sorting the indices
# sorts the values), so the (resamples x n) draw is sorted once per (n, resamples, seed) and
# shared by every metric and every group of that size: a report over hundreds of cases costs
# O(resamples) per metric instead of a gather and a partition per resample.


@functools.lru_cache(maxsize=64)
def _middle_ranks(n: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per resample, the ranks (into sorted values) of its two middle elements."""
    drawn = np.sort(_draw(n, resamples, seed), axis=1)
    low, high = drawn[:, (n - 1) // 2], drawn[:, n // 2]
    low.flags.writeable = False
    high.flags.writeable = False
    return low, high


def iid_median_replicates(
    values: Sequence[float] | np.ndarray,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> np.ndarray | None:
    """Medians of ``resamples`` bootstrap resamples of ``values`` (None when there are none)."""
    ordered = np.sort(np.asarray(values, dtype=float))
    if not ordered.size:
        return None
    low, high = _middle_ranks(int(ordered.size), resamples, seed)
    return np.asarray((ordered[low] + ordered[high]) / 2)


def percentile_ci(replicates: np.ndarray | None) -> list[float] | None:
    """The percentile 95% interval of bootstrap replicates, as JSON-ready floats."""
    if replicates is None or not replicates.size:
        return None
    finite = replicates[np.isfinite(replicates)]
    if finite.size < replicates.size * 0.99:  # undefined ratios in >1% of resamples
        return None
    low, high = np.percentile(finite, [2.5, 97.5])
    return [float(low), float(high)]


def iid_describe(
    values: Sequence[float] | np.ndarray,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """``{n, median, p95, min, median_ci95}`` of exchangeable repetitions."""
    array = np.asarray(values, dtype=float)
    return {
        "n": int(array.size),
        "median": float(np.median(array)) if array.size else None,
        "p95": float(np.percentile(array, 95.0, method="linear")) if array.size else None,
        "min": float(array.min()) if array.size else None,
        "median_ci95": percentile_ci(iid_median_replicates(array, resamples, seed)),
    }


def ratio_replicates(
    numerator: Sequence[float],
    denominator: Sequence[float],
    paired: bool,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> np.ndarray | None:
    """Bootstrap replicates of median(numerator) / median(denominator).

    Paired (same length, element i of both measured on the same instance): pairs are resampled
    together, so what the instance contributes to both cancels inside each replicate.
    Unpaired: each side is resampled on its own (different seeds, so the draws are independent).
    """
    top, bottom = np.asarray(numerator, float), np.asarray(denominator, float)
    if not top.size or not bottom.size:
        return None
    if paired and top.size == bottom.size:
        chosen = _draw(top.size, resamples, seed)
        top_medians = np.median(top[chosen], axis=1)
        bottom_medians = np.median(bottom[chosen], axis=1)
    else:
        top_medians = iid_median_replicates(top, resamples, seed)
        bottom_medians = iid_median_replicates(bottom, resamples, seed + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(top_medians) / np.asarray(bottom_medians)


def ratio_describe(
    numerator: Sequence[float],
    denominator: Sequence[float],
    paired: bool,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> tuple[dict[str, Any], np.ndarray | None]:
    """The ratio of medians with its 95% CI, and the replicates (for a geometric mean)."""
    top, bottom = median(numerator), median(denominator)
    ratio = top / bottom if top is not None and bottom else None
    replicates = ratio_replicates(numerator, denominator, paired, resamples, seed)
    return {
        "ratio": ratio,
        "ratio_ci95": percentile_ci(replicates) if ratio is not None else None,
        "paired": bool(paired and len(numerator) == len(denominator)),
        "n": [len(numerator), len(denominator)],
    }, replicates


def geometric_mean_describe(ratios: Sequence[float], replicates: Sequence[np.ndarray]) -> dict:
    """Geometric mean of per-case ratios; its CI from the per-case replicates (cases fixed)."""
    if not ratios or any(r <= 0 for r in ratios):
        return {"cases": len(ratios), "geometric_mean": None, "ci95": None}
    stacked = np.vstack([np.asarray(r, float) for r in replicates])
    with np.errstate(divide="ignore", invalid="ignore"):
        combined = np.exp(np.mean(np.log(stacked), axis=0))
    return {
        "cases": len(ratios),
        "geometric_mean": float(np.exp(np.mean(np.log(np.asarray(ratios, float))))),
        "ci95": percentile_ci(combined),
    }
