"""``history add``: one run directory (ours or the peer's) into the store, in one transaction.

Adding is idempotent: a run is keyed by ``run_facts.run_uid`` and carries the sha256 of its
manifest, host summary and rows; the same content again changes nothing. A run whose content
changed (it was resumed, or it was still running when added) replaces its earlier entry whole.

The rows are read by DuckDB (``extract``), under ``runtime.rundir``'s reading rule: a torn final
line (a run killed mid-write) is left out and said; any other damaged line, or a second row for
a key, is an error naming the file and line, found by the project's own reader once DuckDB has
refused the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.compare import labels
from metewand.history import extract
from metewand.history.run_facts import inputs_base, read_manifest, run_facts, run_uid, suite_of
from metewand.runtime import rundir
from metewand.runtime.store import read_results

ADDED, UNCHANGED, REPLACED = "added", "unchanged", "replaced"
RUN_COLUMNS = (
    "run_uid",
    "run_id",
    "suite",
    "layout",
    "state",
    "started_at",
    "ended_at",
    "metewand_version",
    "git_commit",
    "git_branch",
    "git_dirty",
    "git_commit_time",
    "tree_path",
    "host_fingerprint",
    "host",
    "identities",
    "pollution_passed",
    "pollution",
    "rows_total",
    "content_sha256",
    "run_dir",
    "added_at",
)


@dataclass(frozen=True)
class Added:
    run_dir: Path
    run_id: str
    run_uid: str
    suite: str
    outcome: str  # added | unchanged | replaced
    attempts: int
    values: int
    torn_tail_bytes: int


def _valid_length(path: Path) -> tuple[int, int]:
    """(bytes up to the last newline, file size), read from the end: a torn tail is what
    follows the last newline."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            handle.seek(start)
            chunk = handle.read(end - start)
            found = chunk.rfind(b"\n")
            if found >= 0:
                return start + found + 1, size
            end = start
    return 0, size


def _digest(run_dir: Path, results_length: int) -> str:
    """sha256 of the manifest, the host summary and the whole rows of results.jsonl."""
    digest = hashlib.sha256()
    for name in (rundir.MANIFEST, rundir.HOST_SUMMARY):
        path = run_dir / name
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"")
    digest.update(rundir.RESULTS.encode() + b"\0")
    with open(run_dir / rundir.RESULTS, "rb") as handle:
        left = results_length
        while left > 0:
            chunk = handle.read(min(left, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest.hexdigest()


def _first_row_keys(path: Path) -> set[str]:
    with open(path, "rb") as handle:
        line = handle.readline()
    try:
        row = json.loads(line)
    except ValueError:
        return set()
    return set(row) if isinstance(row, dict) else set()


def _readable_copy(path: Path, length: int, size: int) -> tuple[Path, Path | None]:
    """The file DuckDB reads: the rows file itself, or (torn tail) a copy of its whole lines."""
    if length == size:
        return path, None
    scratch = Path(tempfile.mkdtemp(prefix="metewand-history-"))
    copy = scratch / rundir.RESULTS
    with open(path, "rb") as src, open(copy, "wb") as dst:
        left = length
        while left > 0:
            chunk = src.read(min(left, 1 << 20))
            dst.write(chunk)
            left -= len(chunk)
    return copy, scratch


def _read_rows(con: Any, statement: str, path: Path) -> None:
    """Run the reading ``statement`` with DuckDB's read buffers sized for ordinary rows
    (``extract.READ_ROW_BYTES``), and again allowing ``extract.MAX_ROW_BYTES`` when a row is
    larger: buffers sized for the largest row allowed cost a 20,000-row run ~0.2 s CPU and
    ~200 MB more (fresh memory faulted in), for rows that are ~14 KB."""
    import duckdb

    try:
        con.execute(statement, {"path": str(path), "max_bytes": extract.READ_ROW_BYTES})
    except duckdb.InvalidInputException as exc:
        if "maximum_object_size" not in str(exc):
            raise
        con.execute(statement, {"path": str(path), "max_bytes": extract.MAX_ROW_BYTES})


def _stage_rows(con: Any, path: Path, suite: str, results: Path) -> None:
    """Read the rows into the temp table ``mw_rows``; damage is named by the project's reader."""
    import duckdb

    for statement in extract.MACROS:
        con.execute(statement)
    query = extract.COMPUTE_STAGE if suite == "compute" else extract.BROWSER_STAGE
    try:
        _read_rows(con, f"CREATE OR REPLACE TEMP TABLE mw_rows AS {query}", path)
        duplicate = con.execute(
            "SELECT 1 FROM mw_rows WHERE key IS NOT NULL GROUP BY key HAVING count(*) > 1 LIMIT 1"
        ).fetchone()
    except duckdb.Error as exc:
        read_results(results)  # raises RunDirError naming the file and line when it finds it
        raise rundir.RunDirError(f"{results}: cannot be read: {str(exc).splitlines()[0]}") from None
    if duplicate:
        read_results(results)
        raise rundir.RunDirError(f"{results}: a key has two rows")


def _counted_condition(suite: str) -> str:
    if suite == "compute":
        return "status = 'accepted' AND coalesce(role, '') <> 'warmup'"
    return "status = 'pass'"


def _label_tables(con: Any, suite: str) -> None:
    """Group labels made by compare's own functions, once per distinct coordinate set."""
    con.execute("CREATE OR REPLACE TEMP TABLE mw_task_labels (coords VARCHAR, task VARCHAR)")
    con.execute(
        "CREATE OR REPLACE TEMP TABLE mw_subject_labels (impl VARCHAR, params VARCHAR, "
        "subject VARCHAR)"
    )
    if suite != "compute":
        return
    coords = [r[0] for r in con.execute("SELECT DISTINCT coords FROM mw_rows").fetchall()]
    tasks = [[c, labels.case_label(_case(json.loads(c)))] for c in coords]
    if tasks:
        con.executemany("INSERT INTO mw_task_labels VALUES (?, ?)", tasks)
    impls = con.execute(
        "SELECT DISTINCT implementation, implementation_parameters::VARCHAR FROM mw_rows"
    ).fetchall()
    subjects = [
        [
            name,
            params,
            labels.implementation_label(
                {"implementation": name, "implementation_parameters": _json_or_none(params)}
            ),
        ]
        for name, params in impls
    ]
    if subjects:
        con.executemany("INSERT INTO mw_subject_labels VALUES (?, ?, ?)", subjects)


def _case(coords: dict[str, Any]) -> dict[str, Any]:
    """``labels.case_of`` over the coordinates DuckDB collected (parameters default to {})."""
    return labels.case_of(coords)


def _json_or_none(text: str | None) -> Any:
    return json.loads(text) if text is not None else None


def _attempts_sql(suite: str) -> str:
    """Each attempt's columns (``extract.ATTEMPT_COLUMNS``) beside the staged columns its values
    are read from, so a value line needs no join back to its attempt."""
    counted = _counted_condition(suite)
    # A row without a key is named by its line: the staged table's row id, as the read keeps
    # the file's order (row_number() over the read instead cost a 20,000-row run ~0.4 s)
    sources = ", ".join(f"r.{c}" for c in extract.SOURCE_COLUMNS[suite])
    if suite == "compute":
        return f"""
        SELECT coalesce(t.task, r.coords) AS task, coalesce(s.subject,
               coalesce(r.implementation, 'unknown')) AS subject, '' AS driver,
               coalesce(r.key, 'line' || (r.rowid + 1)::VARCHAR) AS attempt_key,
               coalesce(r.status, 'failed') AS status, ({counted}) IS TRUE AS counted,
               {sources}, r.inputs
        FROM mw_rows r
        LEFT JOIN mw_task_labels t ON t.coords = r.coords
        LEFT JOIN mw_subject_labels s ON s.impl IS NOT DISTINCT FROM r.implementation
             AND s.params IS NOT DISTINCT FROM r.implementation_parameters::VARCHAR
        WHERE coalesce(r.calibration_twin::VARCHAR, 'false') <> 'true'"""
    return f"""
        SELECT r.task_id AS task, coalesce(r.engine, '') AS subject,
               r.driver, coalesce(r.key, 'line' || (r.rowid + 1)::VARCHAR) AS attempt_key,
               coalesce(r.status, 'infra') AS status, ({counted}) IS TRUE AS counted,
               {sources}, r.inputs
        FROM mw_rows r
        WHERE r.task_id IS NOT NULL
          AND coalesce(r.calibration_twin::VARCHAR, 'false') <> 'true'"""


def _insert_values(con: Any, suite: str, uid: str) -> tuple[int, int]:
    """(attempts, values) of the run, its values inserted; ``mw_attempts`` is a view (the
    values are read in one pass over the staged rows)."""
    con.execute(f"CREATE OR REPLACE TEMP VIEW mw_attempts AS {_attempts_sql(suite)}")
    stored = con.execute(
        f"""INSERT INTO attempt_values
            SELECT $uid, {extract.ATTEMPT_COLUMNS}, metric, form, value, reason
            FROM ({extract.values_sql(suite)})""",
        {"uid": uid},
    ).fetchone()[0]
    attempts = con.execute("SELECT count(*) FROM mw_attempts").fetchone()[0]
    return int(attempts), int(stored)


def _insert_inputs(con: Any, uid: str, base: str | None) -> None:
    """A digest of each group's declared inputs (``run_facts.inputs_base`` and each row's own),
    for the groups whose every row names them: one row that does not leaves the group's inputs
    unknown, never guessed from the others."""
    if base is None:
        return
    groups = con.execute(
        "SELECT task, subject, driver, string_agg(DISTINCT inputs, chr(10) ORDER BY inputs), "
        "count(inputs) = count(*) FROM mw_attempts GROUP BY ALL"
    ).fetchall()
    lines = [
        [uid, task, subject, driver, hashlib.sha256(f"{base}\n{named}".encode()).hexdigest()]
        for task, subject, driver, named, whole in groups
        if whole and named
    ]
    if lines:
        con.executemany("INSERT INTO group_inputs VALUES (?, ?, ?, ?, ?)", lines)


def _run_line(facts: dict[str, Any], uid: str, digest: str, rows: int) -> list[Any]:
    from metewand.measure.clock import utc_now

    line = {
        **facts,
        "run_uid": uid,
        "content_sha256": digest,
        "rows_total": rows,
        "added_at": utc_now(),
    }
    for key in ("host", "identities", "pollution"):
        line[key] = canonical.dumps_str(line[key])
    return [line[name] for name in RUN_COLUMNS]


def _staged(con: Any, readable: Path, suite: str, run_dir: Path, length: int) -> str:
    """Stage a new run's rows while another thread hashes its files (DuckDB and hashlib both
    let go of the GIL: the 20,000-row run's 230 MB are hashed during the read); the digest."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(_digest, run_dir, length)
        _stage_rows(con, readable, suite, run_dir / rundir.RESULTS)
        return pending.result()


def add_run(con: Any, run_dir: Path) -> Added:
    """Add (or replace) one run; the store is changed by one transaction or not at all."""
    results = run_dir / rundir.RESULTS
    if not results.is_file():
        raise rundir.RunDirError(f"{run_dir}: no {rundir.RESULTS} (is this a run directory?)")
    manifest = read_manifest(run_dir)
    suite = suite_of(manifest, _first_row_keys(results))
    facts = run_facts(run_dir, manifest, suite)
    uid = run_uid(facts, json.loads(canonical.dumps_str(facts["host"])))
    length, size = _valid_length(results)
    known = con.execute(
        "SELECT content_sha256 FROM runs WHERE run_uid = $uid", {"uid": uid}
    ).fetchone()
    digest = _digest(run_dir, length) if known is not None else None
    if known is not None and known[0] == digest:
        return Added(run_dir, facts["run_id"], uid, suite, UNCHANGED, 0, 0, size - length)
    readable, scratch = _readable_copy(results, length, size)
    try:
        if digest is None:  # a new run: hashed while DuckDB reads it
            digest = _staged(con, readable, suite, run_dir, length)
        else:
            _stage_rows(con, readable, suite, results)
        _label_tables(con, suite)
        rows = con.execute("SELECT count(*) FROM mw_rows").fetchone()[0]
        con.execute("BEGIN TRANSACTION")
        try:
            for table in ("attempt_values", "group_inputs", "runs"):
                con.execute(f"DELETE FROM {table} WHERE run_uid = $uid", {"uid": uid})
            con.execute(
                f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES "
                f"({', '.join('?' for _ in RUN_COLUMNS)})",
                _run_line(facts, uid, digest, int(rows)),
            )
            attempts, stored = _insert_values(con, suite, uid)
            _insert_inputs(con, uid, inputs_base(manifest, suite))
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        con.execute("DROP VIEW IF EXISTS mw_attempts")
        for table in ("mw_rows", "mw_task_labels", "mw_subject_labels"):
            con.execute(f"DROP TABLE IF EXISTS {table}")
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    outcome = REPLACED if known is not None else ADDED
    return Added(run_dir, facts["run_id"], uid, suite, outcome, attempts, stored, size - length)


def add_runs(history: Path, run_dirs: list[Path]) -> list[Added]:
    """Each run in its own transaction, in the order given."""
    from metewand.history.store import writing

    with writing(history) as con:
        return [add_run(con, Path(os.path.abspath(d))) for d in run_dirs]
