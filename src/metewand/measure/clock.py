"""Wall-clock stamps as every record writes them: UTC, ISO 8601 to the millisecond, ``Z``.

Run manifests, rows, host telemetry samples, materialization receipts and compute attempt
records all take their ``*_at`` fields from ``utc_now``, so one format holds across the files of
a run. Durations never come from it (they come from monotonic clocks).
"""

from __future__ import annotations

import datetime as dt


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
