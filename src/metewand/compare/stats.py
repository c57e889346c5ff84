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

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

DEFAULT_RESAMPLES = 2000
DEFAULT_BOOTSTRAP_SEED = 20240607
P95_METHOD = "linear"  # numpy's default (Hyndman-Fan type 7): interpolates between ranks
CI_LEVEL = 0.95
BOOTSTRAP_CHUNK_VALUES = 4_000_000  # resampled values held at once (~32 MB of float64)


def median(values: Sequence[float]) -> float | None:
    return float(np.median(np.asarray(values, dtype=float))) if len(values) else None


def p95(values: Sequence[float]) -> float | None:
    if not len(values):
        return None
    return float(np.percentile(np.asarray(values, dtype=float), 95.0, method="linear"))


def _group(values: Sequence[float], clusters: Sequence[Hashable]) -> list[np.ndarray]:
    if len(values) != len(clusters):
        raise ValueError("values and clusters must have the same length")
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for value, cluster in zip(values, clusters, strict=True):
        groups[cluster].append(float(value))
    # sorted keys so the result does not depend on row order
    return [np.asarray(groups[key]) for key in sorted(groups, key=repr)]


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
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, len(groups), size=(resamples, len(groups)))
    medians = _resampled_medians(groups, chosen)
    low, high = np.percentile(medians, [2.5, 97.5])
    return (float(low), float(high))


def _resampled_medians(groups: list[np.ndarray], chosen: np.ndarray) -> np.ndarray:
    """Median of each resample; ``chosen[b]`` lists the clusters drawn for resample b."""
    sizes = {len(g) for g in groups}
    if len(sizes) == 1:  # the usual case (k attempts per task): vectorised, in bounded chunks
        matrix = np.stack(groups)
        per_resample = matrix.size
        chunk = max(1, BOOTSTRAP_CHUNK_VALUES // per_resample)
        parts = [
            np.median(matrix[chosen[i : i + chunk]].reshape(-1, per_resample), axis=1)
            for i in range(0, chosen.shape[0], chunk)
        ]
        return np.concatenate(parts)
    return _ragged_resampled_medians(groups, chosen)


def _ragged_resampled_medians(groups: list[np.ndarray], chosen: np.ndarray) -> np.ndarray:
    """Clusters of unequal sizes: each chunk of resamples gathered with one fancy index.

    The drawn clusters' value ranges are laid end to end with
    ``repeat(starts - offsets, lengths) + arange`` (no per-cluster Python work); each resample's
    median is then taken over its own slice of the gathered values.
    """
    flat = np.concatenate(groups)
    lengths = np.array([len(g) for g in groups])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    per_resample = lengths[chosen].sum(axis=1)
    chunk = max(1, BOOTSTRAP_CHUNK_VALUES // max(1, int(per_resample.max())))
    medians = np.empty(chosen.shape[0])
    for first in range(0, chosen.shape[0], chunk):
        rows = chosen[first : first + chunk]
        ln = lengths[rows].ravel()
        offsets = np.cumsum(ln) - ln
        gathered = flat[np.repeat(starts[rows].ravel() - offsets, ln) + np.arange(ln.sum())]
        ends = np.cumsum(per_resample[first : first + chunk])
        for i, part in enumerate(np.split(gathered, ends[:-1])):
            medians[first + i] = np.median(part)
    return medians


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
    fit = scipy_stats.linregress(x, y)
    stderr = _finite(fit.stderr)
    if stderr is None and np.allclose(y - (fit.slope * x + fit.intercept), 0.0):
        stderr = 0.0  # an exact line (e.g. a constant process count): scipy gives NaN
    return {
        "n": n,
        "slope_per_attempt": _finite(fit.slope),
        "intercept": _finite(fit.intercept),
        "stderr": stderr,
        "method": "ordinary_least_squares",
        "reason": None,
    }
