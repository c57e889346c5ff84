"""Readers of a compute result row (the shape ``suites/compute/records.py`` writes).

Row keys used here: ``status`` ("accepted", or a failure such as "failed"), ``role``
("measured" | "warmup"), ``implementation`` (a name), ``code`` / ``message`` (the diagnostic
of a failed attempt, null when accepted), ``observation`` (null unless accepted) and ``record``
(the attempt record, always present). Every report, the CSV and ``inspect`` read compute rows
through these functions only, so the row shape is known in exactly one place of ``compare``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ACCEPTED = "accepted"
WARMUP = "warmup"


def _path(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def measurements_of(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The execution-measurements payload of one compute attempt, or None when absent.

    Accepted: ``observation.provenance.data.measurements``. Failed: the attempt record's
    ``outcome.diagnostic.details.measurements``. Either way the attempt record's
    ``provenance.data.measurements`` holds the same payload and is the last resort.
    """
    for path in (
        ("observation", "provenance", "data", "measurements"),
        ("record", "outcome", "diagnostic", "details", "measurements"),
        ("record", "provenance", "data", "measurements"),
    ):
        found = _path(row, *path)
        if isinstance(found, Mapping):
            return found
    return None


def is_accepted(row: Mapping[str, Any]) -> bool:
    return row.get("status") == ACCEPTED


def is_warmup(row: Mapping[str, Any]) -> bool:
    return row.get("role") == WARMUP


def status_of(row: Mapping[str, Any]) -> str:
    status = row.get("status")
    return status if isinstance(status, str) else "failed"


def implementation_of(row: Mapping[str, Any]) -> str:
    name = row.get("implementation")
    return name if isinstance(name, str) else "unknown"


def diagnostic_of(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{code, message}`` of a failed attempt (row top level, else the attempt record)."""
    if is_accepted(row):
        return None
    diagnostic = _path(row, "record", "outcome", "diagnostic")
    code = row.get("code")
    if not isinstance(code, str) and isinstance(diagnostic, Mapping):
        code = diagnostic.get("code")
    message = row.get("message")
    if not isinstance(message, str) and isinstance(diagnostic, Mapping):
        message = diagnostic.get("message")
    return {"code": code if isinstance(code, str) else None, "message": message}


def measured_rows(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows that enter statistics: warm-ups are counted and shown, never measured."""
    return [row for row in rows if not is_warmup(row)]


def dataset_receipt_of(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The dataset materialization receipt of one attempt (which instance it read)."""
    found = _path(row, "record", "provenance", "data", "context", "dataset_materialization")
    return found if isinstance(found, Mapping) else None


def worker_of(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """The attempt's worker facts (``pid``, ``reused``), ``{}`` when absent."""
    found = _path(row, "record", "provenance", "data", "context", "worker")
    return found if isinstance(found, Mapping) else {}


def launches_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The worker process each attempt ran in, for the statistics' launch level: a reused
    worker (``worker.reused`` on its later attempts) is one launch for all its attempts;
    otherwise every attempt had its own worker. (A pid alone would not do: pids wrap, and two
    one-shot workers of a case may get the same one.)"""
    reused = {worker_of(row).get("pid") for row in rows if worker_of(row).get("reused") is True}
    out = []
    for row in rows:
        pid = worker_of(row).get("pid")
        out.append(
            f"worker:{pid}" if pid is not None and pid in reused else f"attempt:{row.get('key')}"
        )
    return out


def ab_of(row: Mapping[str, Any]) -> tuple[str, str, int] | None:
    """An interleaved A/B row's ``(side, pair, session)`` (``run --ab-baseline``), else None:
    ``side`` is "base" or "new", ``pair`` names the repetition both sides ran on the same
    dataset instance, ``session`` the run session (a resume starts a new one) that ran it."""
    ab = row.get("ab")
    if not isinstance(ab, Mapping) or ab.get("side") not in ("base", "new"):
        return None
    return str(ab["side"]), str(ab.get("pair")), int(ab.get("session") or 0)
