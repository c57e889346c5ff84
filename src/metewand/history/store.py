"""The history file: where it is, how it is opened, its schema and its migrations.

One DuckDB file (no server). ``meta`` marks it as ours and holds the schema version; ``runs``
holds one line per run; ``attempt_values`` one line per attempt x metric, its form kept beside
the value: a value that was not measured is ``unavailable`` with a NULL value and a reason, and a
CHECK constraint makes the file itself refuse a number there; ``group_inputs`` one line per run
and group whose declared inputs are known (a digest of them).

Every write is one DuckDB transaction, so a writer killed with ``kill -9`` leaves the file as it
was before the transaction (DuckDB replays or drops its write-ahead log on the next open). A new
store is made whole under a private name and then linked into place, so a writer killed while
it makes one leaves no file that cannot be opened. DuckDB
lets one process write a file at a time; a second writer (two runs ending together) waits for
the lock, up to ``LOCK_WAIT_S``, then gives up with an error naming the file and the holder.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from metewand.errors import InvalidInput

FORMAT = "metewand-history"
SCHEMA_VERSION = 3
DEFAULT_NAME = "history.duckdb"
ENV_VAR = "METEWAND_HISTORY"
LOCK_WAIT_S = 60.0

# Version 1: the first layout. Kept verbatim: the migration test builds a v1 file from it.
SCHEMA_V1 = (
    "CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
    """CREATE TABLE runs (
        run_uid VARCHAR PRIMARY KEY,
        run_id VARCHAR NOT NULL,
        suite VARCHAR NOT NULL,
        layout VARCHAR NOT NULL,
        state VARCHAR,
        started_at TIMESTAMPTZ,
        ended_at TIMESTAMPTZ,
        metewand_version VARCHAR,
        git_commit VARCHAR,
        git_branch VARCHAR,
        git_dirty BOOLEAN,
        tree_path VARCHAR,
        host_fingerprint VARCHAR,
        host JSON,
        identities JSON,
        pollution_passed BOOLEAN,
        pollution JSON,
        rows_total INTEGER NOT NULL,
        content_sha256 VARCHAR NOT NULL,
        run_dir VARCHAR,
        added_at TIMESTAMPTZ NOT NULL
    )""",
    """CREATE TABLE attempt_values (
        run_uid VARCHAR NOT NULL,
        task VARCHAR NOT NULL,
        subject VARCHAR NOT NULL,
        driver VARCHAR NOT NULL,
        attempt_key VARCHAR NOT NULL,
        status VARCHAR NOT NULL,
        counted BOOLEAN NOT NULL,
        metric VARCHAR NOT NULL,
        form VARCHAR NOT NULL CHECK (form IN ('complete', 'partial', 'unavailable')),
        value DOUBLE,
        reason VARCHAR,
        CHECK ((form = 'unavailable') = (value IS NULL))
    )""",
)


def _v1_to_v2(con: Any) -> None:
    """v2 keeps the commit's own time (``git log -1 --format=%cI``) so ``show --by commit``
    orders commits as they were made, not as they were benchmarked; v1 runs read NULL there
    and are ordered by their start."""
    con.execute("ALTER TABLE runs ADD COLUMN git_commit_time TIMESTAMPTZ")


def _v2_to_v3(con: Any) -> None:
    """v3 keeps, per run and group, a digest of the group's declared inputs (``ingest``): a
    step across which they did not change is the environment's, not a commit's. v2 runs have
    none, and their steps stay attributed to their commits."""
    con.execute(
        """CREATE TABLE group_inputs (
            run_uid VARCHAR NOT NULL,
            task VARCHAR NOT NULL,
            subject VARCHAR NOT NULL,
            driver VARCHAR NOT NULL,
            inputs VARCHAR NOT NULL,
            PRIMARY KEY (run_uid, task, subject, driver)
        )"""
    )


# version N -> the step that makes a version-N file version N+1
MIGRATIONS: dict[int, Callable[[Any], None]] = {1: _v1_to_v2, 2: _v2_to_v3}


class HistoryError(InvalidInput):
    """The history file cannot be used: corrupt, foreign, too new, locked, or absent (exit 2)."""


def default_path(out_dir: str | Path = "runs") -> Path:
    """``$METEWAND_HISTORY``, else ``history.duckdb`` beside the run store (``runs/``)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().absolute()
    return Path(out_dir).expanduser().absolute().parent / DEFAULT_NAME


def resolve_path(flag: str | None, out_dir: str | Path = "runs") -> Path:
    """``--history PATH`` when given, else ``default_path``."""
    return Path(flag).expanduser().absolute() if flag else default_path(out_dir)


def _connect(path: Path, read_only: bool) -> Any:
    """A DuckDB connection, waiting for another writer's lock; damage is ``HistoryError``."""
    import duckdb

    deadline = time.monotonic() + LOCK_WAIT_S
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            con.execute("SET TimeZone = 'UTC'")  # every time the store shows is UTC
            con.execute("SET enable_progress_bar = false")  # our commands print their own
            return con
        except duckdb.Error as exc:
            text = str(exc)
            if "lock" in text.lower() and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            raise HistoryError(f"history {path}: cannot be opened: {_first_line(text)}") from None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unknown DuckDB error"


def _check_ours(con: Any, path: Path) -> int:
    """The file's schema version, once it is known to be a metewand history."""
    import duckdb

    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        meta = (
            dict(con.execute("SELECT key, value FROM meta").fetchall()) if "meta" in tables else {}
        )
    except duckdb.Error as exc:
        raise HistoryError(f"history {path}: cannot be read: {_first_line(str(exc))}") from None
    if meta.get("format") != FORMAT:
        raise HistoryError(
            f"history {path}: a DuckDB file but not a metewand history (no meta.format = "
            f"{FORMAT!r}; tables: {', '.join(sorted(tables)) or 'none'})"
        )
    try:
        version = int(meta.get("schema_version", ""))
    except ValueError:
        raise HistoryError(f"history {path}: meta.schema_version is not a number") from None
    if version > SCHEMA_VERSION:
        raise HistoryError(
            f"history {path}: schema version {version} was written by a newer metewand "
            f"(this one reads up to {SCHEMA_VERSION})"
        )
    return version


def _create(con: Any) -> None:
    from metewand.version import tool_version

    con.execute("BEGIN TRANSACTION")
    for statement in SCHEMA_V1:
        con.execute(statement)
    con.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [["format", FORMAT], ["schema_version", "1"], ["created_by", f"metewand {tool_version()}"]],
    )
    _migrate_in_transaction(con, 1)
    con.execute("COMMIT")


def _migrate_in_transaction(con: Any, version: int) -> None:
    while version < SCHEMA_VERSION:
        MIGRATIONS[version](con)
        version += 1
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(version)])


def migrate(con: Any, version: int) -> None:
    """Bring a version-``version`` file to ``SCHEMA_VERSION``: all steps in one transaction, so a
    kill part-way leaves the old version whole."""
    if version == SCHEMA_VERSION:
        return
    con.execute("BEGIN TRANSACTION")
    try:
        _migrate_in_transaction(con, version)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


DRAFT_MARK = ".creating-"


def _create_whole(path: Path) -> None:
    """Make a new store under a private name, then link it to ``path``, so that ``path`` never
    names a file a kill left part-made. DuckDB creates a new file before it writes the file's
    header, and a writer killed between the two left a file that no later open could read
    (ci, 2026-12-07). ``os.link`` will not replace a store another writer linked first."""
    from metewand.runtime.rundir import fsync_dir

    draft = path.with_name(f".{path.name}{DRAFT_MARK}{os.getpid()}")
    draft.unlink(missing_ok=True)
    con = _connect(draft, read_only=False)
    try:
        _create(con)
    finally:
        con.close()  # the last connection's close checkpoints: no write-ahead log is left
    with open(draft, "rb") as fh:
        os.fsync(fh.fileno())
    try:
        os.link(draft, path)
    except FileExistsError:
        pass  # another writer made the store first; ours is not needed
    finally:
        draft.unlink(missing_ok=True)
    fsync_dir(path.parent)


def _remove_dead_drafts(path: Path) -> None:
    """Drafts whose maker is gone (killed while it made the store): no one will link them."""
    for draft in path.parent.glob(f".{path.name}{DRAFT_MARK}*"):
        pid = draft.name.rsplit(DRAFT_MARK, 1)[1].removesuffix(".wal")
        if pid.isdigit() and not _alive(int(pid)):
            draft.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def open_for_write(path: Path) -> Any:
    """The store at ``path``, created whole when absent (a DuckDB file without a table, which a
    writer of an older metewand killed while it created the store could leave, is made here),
    migrated when old."""
    import duckdb

    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_drafts(path)
    if not path.exists():
        _create_whole(path)
    con = _connect(path, read_only=False)
    try:
        if not con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0]:
            _create(con)
        version = _check_ours(con, path)
        migrate(con, version)
    except duckdb.Error as exc:
        con.close()
        raise HistoryError(f"history {path}: {_first_line(str(exc))}") from None
    except BaseException:
        con.close()
        raise
    return con


def open_for_read(path: Path) -> Any:
    """The store at ``path`` for questions; an old schema is migrated first (it needs a write
    once), an absent file is an error saying how one is made."""
    if not path.exists():
        raise HistoryError(
            f"history {path}: no such file (a run adds itself at its end; `metewand history add "
            "RUN` adds existing runs)"
        )
    con = _connect(path, read_only=True)
    try:
        version = _check_ours(con, path)
    except BaseException:
        con.close()
        raise
    if version == SCHEMA_VERSION:
        return con
    con.close()
    open_for_write(path).close()
    return _connect(path, read_only=True)


@contextlib.contextmanager
def writing(path: Path) -> Iterator[Any]:
    con = open_for_write(path)
    try:
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def reading(path: Path) -> Iterator[Any]:
    con = open_for_read(path)
    try:
        yield con
    finally:
        con.close()
