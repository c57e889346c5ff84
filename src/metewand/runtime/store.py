"""The run store shared by every suite: ``<out>/<run_id>/``.

Layout::

    run_manifest.json   {"schema": "metewand_run_manifest/1", run_id, state, created_at,
                         updated_at, resumed_at: [...], data: {...}}  (atomic replace)
    results.jsonl       one canonical JSON row per finished attempt
    artifacts/<key>/    per-attempt artifacts, renamed into place whole
    .staging/           temporary artifact directories (never read; cleared on resume)
    .lock               flock held by the one writer

Crash safety: a row is one ``os.write`` on an ``O_APPEND`` descriptor, so ``kill -9`` leaves
whole lines only; a final line without its newline is a torn write, ignored on read and cut off
when the run is resumed. Artifacts are written before their row, so a row never points at
artifacts that do not exist. Durability against a power cut is a group commit
(``runtime.flusher``): the results file and the directories artifacts were renamed into are
fsynced by a thread of the store's within ~1 s, and before every state change and at close.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.measure.clock import utc_now
from metewand.runtime import rundir
from metewand.runtime.flusher import Flusher

# the run directory's owner keeps these; importers of the store keep finding them here
from metewand.runtime.rundir import JsonlRead as ResultsRead
from metewand.runtime.rundir import StoreError as StoreError
from metewand.runtime.rundir import fsync_dir as _fsync_dir
from metewand.runtime.rundir import give_normal_mode as give_normal_mode
from metewand.runtime.rundir import process_umask as process_umask
from metewand.runtime.rundir import write_json_atomic as write_json_atomic

MANIFEST_NAME = rundir.MANIFEST
RESULTS_NAME = rundir.RESULTS
ARTIFACTS_NAME = rundir.ARTIFACTS
STAGING_NAME = rundir.STAGING
LOCK_NAME = rundir.LOCK
MANIFEST_SCHEMA = "metewand_run_manifest/1"
# the store's own envelope; a suite may add other top-level fields beside it (the browser suite
# writes the peer benchmark's manifest fields there), never replace these
ENVELOPE_KEYS = frozenset(
    {"schema", "run_id", "state", "created_at", "updated_at", "resumed_at", "data"}
)
STATES = ("running", "interrupted", "complete")

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_KEY_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._=+@-]*$")


class RunExistsError(StoreError):
    pass


class DuplicateKeyError(StoreError):
    pass


def new_run_id(now: dt.datetime | None = None) -> str:
    """``<UTC timestamp>-<6 hex>``, sortable by creation time."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def check_key(key: Any) -> str:
    """Attempt keys are '/'-separated segments of safe characters (they name artifact dirs)."""
    if not isinstance(key, str) or not key:
        raise StoreError(f"row key must be a non-empty string, got {key!r}")
    for segment in key.split("/"):
        if not _KEY_SEGMENT.match(segment) or segment in (".", ".."):
            raise StoreError(f"row key {key!r}: bad segment {segment!r}")
    return key


def read_results(path: Path) -> ResultsRead:
    """Whole rows of a results file: ``rundir.read_jsonl``'s rule (a torn tail is reported, any
    other damage or a key that already has a row is an error naming file and line)."""
    return rundir.read_jsonl(path, unique="key")


def read_run_manifest(path: Path) -> dict[str, Any]:
    """``run_manifest.json`` as every reader sees it; damage is an error naming the file."""
    value = rundir.read_json(path)  # damage: RunDirError naming the file
    if value is None and not path.exists():
        raise StoreError(f"{path.parent} is not a run directory (no {path.name})")
    if not isinstance(value, dict) or value.get("schema") != MANIFEST_SCHEMA:
        raise StoreError(f"{path}: not a {MANIFEST_SCHEMA} manifest")
    if not isinstance(value.get("data"), dict) or value.get("state") not in STATES:
        raise StoreError(f"{path}: 'data' must be an object and 'state' one of {STATES}")
    for key in ("run_id", "created_at"):
        if not isinstance(value.get(key), str):
            raise StoreError(f"{path}: '{key}' must be a string")
    if not isinstance(value["data"].get("suite", ""), str):
        raise StoreError(f"{path}: 'data.suite' must be a string")
    return value


class RunView:
    """Read-only view of a run directory (what `status` and `export` use)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        if not os.path.lexists(self.run_dir / MANIFEST_NAME):  # a FIFO etc.: its reader says so
            raise StoreError(f"{self.run_dir} is not a run directory (no {MANIFEST_NAME})")

    @property
    def manifest(self) -> dict[str, Any]:
        return read_run_manifest(self.run_dir / MANIFEST_NAME)

    @functools.cached_property
    def run_id(self) -> str:
        """Read once: a run's id never changes (attempts ask for it often)."""
        return str(self.manifest["run_id"])

    @property
    def state(self) -> str:
        return str(self.manifest["state"])

    @property
    def live_state(self) -> str:
        """``state``, except that a "running" run whose writer is gone (kill -9, power loss)
        is what it really is: ``interrupted`` (``--resume`` continues it)."""
        state = self.state
        if state == "running" and not writer_active(self.run_dir):
            return "interrupted"
        return state

    def read(self) -> ResultsRead:
        return read_results(self.run_dir / RESULTS_NAME)

    def rows(self) -> list[dict[str, Any]]:
        return self.read().rows

    def finished_keys(self) -> set[str]:
        return {str(row["key"]) for row in self.rows()}

    def artifact_path(self, key: str) -> Path:
        return self.run_dir / ARTIFACTS_NAME / check_key(key)


class RunStore(RunView):
    """The single writer of a run directory (holds an exclusive flock while open)."""

    def __init__(self, run_dir: Path, lock_fd: int) -> None:
        super().__init__(run_dir)
        self._lock_fd = lock_fd
        self._mutex = threading.Lock()
        read = self.read()
        self._keys = {str(row["key"]) for row in read.rows}
        self._fd = os.open(
            self.run_dir / RESULTS_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
        )
        self._flusher = Flusher(self._fd)

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        out_dir: Path | str,
        run_id: str | None,
        manifest_data: dict[str, Any],
        top_level: dict[str, Any] | None = None,
    ) -> RunStore:
        """Create ``out_dir/run_id`` (refusing an existing one) in state ``running``.
        ``top_level``: fields written beside the envelope (see ``update_top_level``)."""
        run_id = run_id or new_run_id()
        if not _RUN_ID.match(run_id):
            raise StoreError(f"invalid run id {run_id!r}")
        extra = _outside_envelope(top_level or {}, run_id)
        canonical.dumps(manifest_data)  # refuse non-JSON data before anything exists on disk
        canonical.dumps(extra)
        run_dir = rundir.new_run_dir(out_dir, run_id)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            run_dir.mkdir()
        except FileExistsError:
            raise RunExistsError(f"{run_dir} exists; resume it instead of creating it") from None
        lock_fd = _lock(run_dir)
        now = utc_now()
        manifest = {
            **extra,
            "schema": MANIFEST_SCHEMA,
            "run_id": run_id,
            "state": "running",
            "created_at": now,
            "updated_at": now,
            "resumed_at": [],
            "data": manifest_data,
        }
        write_json_atomic(run_dir / MANIFEST_NAME, manifest)
        (run_dir / RESULTS_NAME).touch()
        _fsync_dir(run_dir)
        return cls(run_dir, lock_fd)

    @classmethod
    def open(cls, run_dir: Path | str) -> RunStore:
        """Resume a run: cut a torn tail line, clear staging, mark it running again."""
        run_dir = Path(run_dir)
        RunView(run_dir)  # refuses a directory that is not a run
        lock_fd = _lock(run_dir)
        try:
            _repair(run_dir)
            store = cls(run_dir, lock_fd)
        except BaseException:
            os.close(lock_fd)
            raise
        manifest = store.manifest
        manifest["resumed_at"] = [*manifest.get("resumed_at", []), utc_now()]
        store._write_manifest(manifest, state="running")
        return store

    # -- writing -------------------------------------------------------------------------

    def append(self, row: dict[str, Any]) -> None:
        """Append one finished attempt; its key must be new to this run."""
        key = check_key(row.get("key"))
        if not isinstance(row.get("status"), str):
            raise StoreError(f"row {key!r}: 'status' must be a string")
        data = canonical.line(row)
        with self._mutex:
            self._flusher.check()
            if key in self._keys:
                raise DuplicateKeyError(f"attempt key {key!r} already has a row")
            written = os.write(self._fd, data)
            if written != len(data):
                raise StoreError(f"short write of row {key!r} ({written}/{len(data)} bytes)")
            self._keys.add(key)
        self._flusher.note()

    def finished_keys(self) -> set[str]:
        with self._mutex:
            return set(self._keys)

    def artifact_dir(self, key: str) -> contextlib.AbstractContextManager[Path]:
        """Yield a private staging dir; on success it becomes ``artifacts/<key>`` whole."""
        return staged_artifact_dir(self, key, self._flusher)

    def set_state(self, state: str) -> None:
        if state not in STATES:
            raise StoreError(f"unknown run state {state!r}; expected one of {STATES}")
        self._write_manifest(self.manifest, state=state)

    def update_manifest(self, data: dict[str, Any]) -> None:
        """Merge ``data`` into the manifest's ``data`` object (top-level keys replaced)."""
        manifest = self.manifest
        manifest["data"] = {**manifest["data"], **data}
        self._write_manifest(manifest, state=manifest["state"])

    def update_top_level(self, fields: dict[str, Any]) -> None:
        """Set top-level manifest fields beside the envelope (whole values replaced)."""
        manifest = self.manifest
        manifest.update(_outside_envelope(fields, str(manifest["run_id"])))
        self._write_manifest(manifest, state=manifest["state"])

    def close(self) -> None:
        if self._fd >= 0:
            self._flusher.close()
            # Nothing writes artifacts once the writer closes: no temporary dir outlives it.
            shutil.rmtree(self.run_dir / STAGING_NAME, ignore_errors=True)
            os.close(self._fd)
            os.close(self._lock_fd)
            self._fd = -1

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_manifest(self, manifest: dict[str, Any], state: str) -> None:
        self._flusher.flush()  # the rows are on disk before the manifest says what they are
        with self._mutex:
            manifest["state"] = state
            manifest["updated_at"] = utc_now()
            write_json_atomic(self.run_dir / MANIFEST_NAME, manifest)


@contextlib.contextmanager
def hold_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run's writer lock (refused while a live metewand has the run open)."""
    fd = _lock(Path(run_dir))
    try:
        yield
    finally:
        os.close(fd)


def _outside_envelope(fields: dict[str, Any], run_id: str) -> dict[str, Any]:
    """``fields`` minus a ``run_id`` equal to the run's; any other envelope key is refused."""
    out = dict(fields)
    if out.get("run_id", run_id) != run_id:
        raise StoreError(f"top-level run_id {out['run_id']!r} differs from the run's {run_id!r}")
    out.pop("run_id", None)
    clash = sorted(ENVELOPE_KEYS & set(out))
    if clash:
        raise StoreError(f"top-level manifest fields {clash} would replace the store's envelope")
    return out


def _lock(run_dir: Path) -> int:
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(f"{run_dir} is open by another metewand process") from None
    return fd


def writer_active(run_dir: Path) -> bool:
    """Whether a process holds the run's writer lock (the kernel drops it when the holder dies)."""
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing also releases the probe's own shared lock
    return False


@contextlib.contextmanager
def staged_artifact_dir(view: RunView, key: str, flusher: Flusher | None) -> Iterator[Path]:
    """A private staging dir that becomes ``artifacts/<key>`` whole on success. The directories
    that gained an entry (``publish_dir``) reach the disk with ``flusher``'s next group commit,
    or at once without one (a process that shares the run but not its store: a Dask worker)."""
    final = view.artifact_path(key)
    staging_root = view.run_dir / STAGING_NAME
    staging_root.mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="artifact-", dir=staging_root))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    gained: list[Path] = []  # the directories that gained an entry (``publish_dir``)
    rundir.publish_dir(staging, final, replace=True, sync_parent=flusher is None, gained=gained)
    if flusher is not None:
        for directory in gained:
            flusher.note(directory)


def _repair(run_dir: Path) -> None:
    rundir.cut_torn_tails(run_dir)  # results.jsonl and every other appended file
    shutil.rmtree(run_dir / STAGING_NAME, ignore_errors=True)
    _fsync_dir(run_dir)
