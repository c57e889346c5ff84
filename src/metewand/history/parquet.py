"""``history export --parquet DIR`` and ``history import --parquet DIR``: a store as Parquet that
DuckDB, Spark or Polars read on any cluster, and another store merged back in.

Layout (hive partitioning, so a reader can prune by suite)::

    DIR/runs/suite=<suite>/data_0.parquet            one line per run
    DIR/attempt_values/suite=<suite>/data_0.parquet  one line per attempt x metric
    DIR/group_inputs/suite=<suite>/data_0.parquet    one line per run x group with known inputs
    DIR/meta.parquet                                 format and schema version of the export

An export of schema version 2 (before ``group_inputs``) imports too: its runs' groups have no
known inputs, as in a store migrated from version 2.

Import is idempotent: a run already in the store with the same content digest is skipped, one
with another digest (it was resumed since) replaces the store's entry, all in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metewand.history.store import FORMAT, SCHEMA_VERSION, HistoryError, reading, writing

OLDEST_IMPORTED = 2  # an export of this schema version or newer (up to ours) imports


@dataclass(frozen=True)
class Imported:
    added: int
    replaced: int
    unchanged: int


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def export(history: Path, out: Path) -> tuple[int, int]:
    """Write the store's runs and values under ``out``; returns (runs, values)."""
    out.mkdir(parents=True, exist_ok=True)
    with reading(history) as con:
        con.execute(
            f"COPY (SELECT * FROM runs) TO {_quote(out / 'runs')} "
            "(FORMAT parquet, PARTITION_BY (suite), OVERWRITE_OR_IGNORE)"
        )
        con.execute(
            f"COPY (SELECT v.*, r.suite FROM attempt_values v JOIN runs r USING (run_uid)) TO "
            f"{_quote(out / 'attempt_values')} (FORMAT parquet, PARTITION_BY (suite), "
            "OVERWRITE_OR_IGNORE)"
        )
        if con.execute("SELECT count(*) FROM group_inputs").fetchone()[0]:
            con.execute(
                f"COPY (SELECT g.*, r.suite FROM group_inputs g JOIN runs r USING (run_uid)) TO "
                f"{_quote(out / 'group_inputs')} (FORMAT parquet, PARTITION_BY (suite), "
                "OVERWRITE_OR_IGNORE)"
            )
        con.execute(
            f"COPY (SELECT '{FORMAT}' AS format, {SCHEMA_VERSION} AS schema_version) TO "
            f"{_quote(out / 'meta.parquet')} (FORMAT parquet)"
        )
        runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        values = con.execute("SELECT count(*) FROM attempt_values").fetchone()[0]
    return int(runs), int(values)


def _check_export(con: Any, src: Path) -> int:
    """The export's schema version, when this store can import it."""
    import duckdb

    meta_path = src / "meta.parquet"
    try:
        meta = con.execute(
            f"SELECT format, schema_version FROM read_parquet({_quote(meta_path)})"
        ).fetchone()
    except duckdb.Error as exc:
        raise HistoryError(
            f"{meta_path}: not a metewand history export ({str(exc).splitlines()[0]})"
        ) from None
    if meta is None or meta[0] != FORMAT or not OLDEST_IMPORTED <= int(meta[1]) <= SCHEMA_VERSION:
        raise HistoryError(
            f"{meta_path}: format {meta!r}, expected ({FORMAT!r}, {OLDEST_IMPORTED} to "
            f"{SCHEMA_VERSION})"
        )
    return int(meta[1])


def import_parquet(history: Path, src: Path) -> Imported:
    """Merge the export at ``src`` into the store at ``history`` (created when absent)."""
    with writing(history) as con:
        _check_export(con, src)
        inputs_dir = src / "group_inputs"
        runs_glob = _quote(src / "runs" / "**" / "*.parquet")
        values_glob = _quote(src / "attempt_values" / "**" / "*.parquet")
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE mw_in_runs AS SELECT * FROM read_parquet({runs_glob}, hive_partitioning = true)"
        )
        counts = con.execute(
            """SELECT count(*) FILTER (WHERE r.run_uid IS NULL),
                      count(*) FILTER (WHERE r.run_uid IS NOT NULL AND r.content_sha256 <> i.content_sha256),
                      count(*) FILTER (WHERE r.content_sha256 = i.content_sha256)
               FROM mw_in_runs i LEFT JOIN runs r USING (run_uid)"""
        ).fetchone()
        columns = [
            r[0] for r in con.execute("SELECT name FROM pragma_table_info('runs')").fetchall()
        ]
        value_columns = [
            r[0]
            for r in con.execute("SELECT name FROM pragma_table_info('attempt_values')").fetchall()
        ]
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                """CREATE OR REPLACE TEMP TABLE mw_take AS SELECT i.run_uid FROM mw_in_runs i
                   LEFT JOIN runs r USING (run_uid)
                   WHERE r.run_uid IS NULL OR r.content_sha256 <> i.content_sha256"""
            )
            for table in ("attempt_values", "group_inputs", "runs"):
                con.execute(f"DELETE FROM {table} WHERE run_uid IN (SELECT run_uid FROM mw_take)")
            con.execute(
                f"INSERT INTO runs ({', '.join(columns)}) SELECT {', '.join(columns)} FROM mw_in_runs "
                "WHERE run_uid IN (SELECT run_uid FROM mw_take)"
            )
            con.execute(
                f"INSERT INTO attempt_values ({', '.join(value_columns)}) SELECT "
                f"{', '.join(value_columns)} FROM read_parquet({values_glob}, hive_partitioning = true) "
                "WHERE run_uid IN (SELECT run_uid FROM mw_take)"
            )
            if inputs_dir.is_dir():  # an export with no known inputs (or of v2) has none
                con.execute(
                    "INSERT INTO group_inputs SELECT run_uid, task, subject, driver, inputs FROM "
                    f"read_parquet({_quote(inputs_dir / '**' / '*.parquet')}, "
                    "hive_partitioning = true) WHERE run_uid IN (SELECT run_uid FROM mw_take)"
                )
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
        con.execute("DROP TABLE IF EXISTS mw_in_runs")
        con.execute("DROP TABLE IF EXISTS mw_take")
    return Imported(int(counts[0]), int(counts[1]), int(counts[2]))
