"""The one owner of a run directory: its file names, how RUN names one, how its JSON-Lines files
are read, and how its files are written.

Every module that touches ``<out>/<run_id>/`` takes names, reading and writing from here, so a file
is spelled once, a torn line means one thing everywhere, and every replaced file is replaced the
same crash-safe way. (``measure`` does not import ``runtime``: ``measure.host`` appends telemetry
lines to a path its caller names, ``HOST_TELEMETRY`` below.)

Layout (files of the store, then of the suites, then the derived reports)::

    run_manifest.json       the store's manifest (atomic replace)
    results.jsonl           one canonical row per finished attempt
    artifacts/<key>/        per-attempt artifacts (see ATTEMPT_* names)
    .staging/  .lock        the store's temporary artifact dirs and writer lock
    .work/                  compute attempts' working directories (temporary)
    owned.jsonl             groups and processes the run created (runtime.owned)
    engine_pids.jsonl       browser engines the run started (suites.browser.leftovers)
    host_telemetry.jsonl    host samples; host_summary.json their summary and pollution gate
    cold_start.jsonl        browser engine cold starts (profiled runs)
    engine_logs/            browser engines' output
    harness_error.txt       a side file: the traceback of a harness failure
    lost_tries.jsonl        Dask runs: tries a dying worker took with it (runtime.dask_run)
    dask_hosts.json         Dask runs: each worker's registration, provenance and telemetry
    scores.json  scorecard.md  report.html  cases.csv  results.csv
    resource_summary.json  resource-card.md
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from metewand.errors import InvalidInput

# ``canonical`` (rfc8785, json, hashlib) and ``tempfile`` are imported where they are used: the
# CLI resolves RUN through this module, and ``--help`` must not pay for them (cli_startup.py).

# -- names --------------------------------------------------------------------------------------

MANIFEST = "run_manifest.json"
RESULTS = "results.jsonl"
ARTIFACTS = "artifacts"
STAGING = ".staging"
WORK = ".work"  # compute attempts' working dirs, removed when the session ends
LOCK = ".lock"
OWNED = "owned.jsonl"
ENGINE_PIDS = "engine_pids.jsonl"
HOST_TELEMETRY = "host_telemetry.jsonl"
HOST_SUMMARY = "host_summary.json"
COLD_START = "cold_start.jsonl"
HARNESS_ERROR = "harness_error.txt"
ENGINE_LOGS = "engine_logs"  # browser engines' stdout/stderr, per worker and for cold starts
SCORES = "scores.json"
SCORECARD = "scorecard.md"
REPORT = "report.html"
CASES_CSV = "cases.csv"
RESULTS_CSV = "results.csv"
RESOURCE_SUMMARY = "resource_summary.json"
RESOURCE_CARD = "resource-card.md"
LOST_TRIES = "lost_tries.jsonl"  # --executor dask: one line per try lost with its worker
DASK_HOSTS = "dask_hosts.json"  # --executor dask: workers, their refusals, per-host telemetry
SIDE_FILES = (HARNESS_ERROR,)
# the JSON-Lines files a run appends to, and so may leave with a torn final line
APPENDED = (RESULTS, OWNED, ENGINE_PIDS, HOST_TELEMETRY, COLD_START, LOST_TRIES)
# journals are read to clean up after a kill: refusing the cleanup over one damaged line would
# leave alive what the other lines name, so their damaged lines are skipped and named in a
# warning (issue #12's "documented skip with a warning") instead of refused
JOURNALS = (OWNED, ENGINE_PIDS)

# inside artifacts/<key>/ (the peer's per-attempt layout for browser attempts)
ATTEMPT_CDP_LOG = "cdp.jsonl"
ATTEMPT_GRADER = "grader.json"
ATTEMPT_GRADER_EVIDENCE = "grader_evidence.json"
ATTEMPT_OUTCOME = "outcome.json"
ATTEMPT_RESOURCE_SAMPLES = "resource.jsonl"
ATTEMPT_ENGINE_LOG_TAIL = "engine_stderr_tail.txt"
# compute attempts: the evaluator's metrics and the implementation's result
ATTEMPT_METRICS_DIR = "metrics"
ATTEMPT_METRICS = "metrics.json"
ATTEMPT_RESULT_DIR = "result"

DEFAULT_RUNS_DIR = "runs"
LATEST = "latest"

# What a reader takes from a run file: a line of a JSON-Lines file (a row is a few KB; the
# worker protocol's 1 MiB line is the model, with room for a large answer) and a whole JSON file.
LINE_LIMIT = 4 * 1024 * 1024
JSON_FILE_LIMIT = 64 * 1024 * 1024


class StoreError(InvalidInput, RuntimeError):
    """The run directory cannot be used as asked."""


class RunDirError(StoreError, ValueError):
    """A file of a run directory is damaged, or RUN names no run (exit 2 at the CLI)."""


def side_file(run_dir: Path | str, name: str) -> Path:
    """Where a run's side file lives: at the top of the run directory, never in artifacts/."""
    if name not in SIDE_FILES:
        raise ValueError(f"{name!r} is not a run side file (known: {', '.join(SIDE_FILES)})")
    return Path(run_dir) / name


# -- resolution ---------------------------------------------------------------------------------


def candidates(run: str, out_dir: str | Path = DEFAULT_RUNS_DIR) -> list[Path]:
    """Where RUN may live: as a path, then as an id under OUT (both made absolute)."""
    as_path = Path(run).expanduser().absolute()
    as_id = (Path(out_dir).expanduser() / run).absolute()
    return [as_path] if as_path == as_id else [as_path, as_id]


def is_run_dir(path: Path) -> bool:
    """A run directory has a manifest, or at least results (a peer's run has only those).
    Any kind of file under those names counts: its reader then says what is wrong with it."""
    return path.is_dir() and any(os.path.lexists(path / name) for name in (MANIFEST, RESULTS))


def find_run_dir(run: str, out_dir: str | Path = DEFAULT_RUNS_DIR) -> Path | None:
    """The run RUN names (a directory, an id under OUT, or ``latest``), or None."""
    for path in candidates(run, out_dir):
        if is_run_dir(path):
            return path
    return newest_run(out_dir) if run == LATEST else None


def newest_run(out_dir: str | Path) -> Path | None:
    """The run under OUT whose manifest was written last (a resumed run counts as new)."""
    root = Path(out_dir).expanduser().absolute()
    try:
        runs = [p.parent for p in root.glob(f"*/{MANIFEST}") if p.is_file()]
        return max(runs, key=lambda p: (p / MANIFEST).stat().st_mtime_ns, default=None)
    except OSError:
        return None


def resolve_run_dir(run: str, out_dir: str | Path = DEFAULT_RUNS_DIR, what: str = "run") -> Path:
    """The absolute run directory RUN names, or ``RunDirError`` saying where it looked."""
    found = find_run_dir(run, out_dir)
    if found is not None:
        return found
    places = candidates(run, out_dir)
    existing = [p for p in places if p.is_dir()]
    if existing:
        raise RunDirError(
            f"{what} {run!r}: {existing[0]} is not a run directory (no {MANIFEST} or {RESULTS})"
        )
    looked = ", ".join(str(p) for p in places)
    raise RunDirError(f"{what} {run!r}: no run directory (looked in {looked})")


def new_run_dir(out_dir: str | Path, run_id: str) -> Path:
    """Where a new run with this id goes: ``OUT/RUN_ID`` (its id is checked by the store)."""
    return Path(out_dir) / run_id


def locate_run_dir(run: str | Path, out_dir: str | Path = DEFAULT_RUNS_DIR) -> Path:
    """The directory RUN names, run or not: the run it resolves to, else the first existing
    candidate, else the id under OUT (its reader then says what is missing there)."""
    found = find_run_dir(str(run), out_dir)
    if found is not None:
        return found
    places = candidates(str(run), out_dir)
    return next((p for p in places if p.is_dir()), places[-1])


def recorded_run_dir(run_dir: Path | str, named: str | Path) -> Path:
    """A run named inside another run's manifest (a calibration baseline): an absolute name as
    it is, a relative one beside the run."""
    path = Path(named)
    return path if path.is_absolute() else Path(run_dir).parent / path


# -- reading ------------------------------------------------------------------------------------


class JsonlRead(NamedTuple):
    rows: list[dict[str, Any]]
    torn_tail_bytes: int  # bytes after the last newline (a write cut short), 0 when clean
    valid_length: int  # file offset just after the last whole line
    damaged: tuple[str, ...] = ()  # "file:line: why" of whole lines skipped (journals only)


def read_jsonl(path: Path | str, unique: str | None = None) -> JsonlRead:
    """Whole JSON-object lines of a run's JSON-Lines file: the one reading rule of every reader.

    Writers append whole lines with one ``write``, so the only damage a kill makes is a final
    line without its newline: a torn tail, ignored and reported in ``torn_tail_bytes``. Any
    whole line that is not a JSON object is damage no writer makes: ``RunDirError`` naming the
    file and line, never a skip. With ``unique``, a second line with the same value of that key
    is such damage too (a duplicated row would be counted twice). A missing file reads as empty.
    The one exception is a journal (``JOURNALS``): see ``read_journal``.
    """
    return _read_lines(path, unique, skip_damaged=False)


def read_journal(path: Path | str) -> JsonlRead:
    """A cleanup journal by ``read_jsonl``'s rule, except that a damaged whole line is skipped
    and named in ``damaged`` (the caller warns with it) instead of raised."""
    return _read_lines(path, None, skip_damaged=True)


def journal_warnings(run_dir: Path | str) -> list[str]:
    """The damaged lines of a run's journals, for the warning a cleanup prints."""
    found: list[str] = []
    for name in JOURNALS:
        found += read_journal(Path(run_dir) / name).damaged
    return [f"{where} (skipped: it names nothing to clean up)" for where in found]


@contextlib.contextmanager
def open_run_file(path: Path | str) -> Iterator[BinaryIO | None]:
    """A run file opened for reading, None when it does not exist. Only a regular file is
    read (a FIFO would block the reader for good, a device would never end), and a symbolic
    link only when it stays inside the file's own directory; anything else is ``RunDirError``
    naming the file. Opened without blocking, then checked again on the open descriptor."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    target = path
    if stat.S_ISLNK(info.st_mode):
        target = path.resolve()
        if not target.is_relative_to(path.parent.resolve()):
            raise RunDirError(f"{path}: a symbolic link out of the run directory ({target})")
    elif not stat.S_ISREG(info.st_mode):
        raise RunDirError(f"{path}: not a regular file ({_file_kind(info.st_mode)})")
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RunDirError(f"{path}: not a regular file ({_file_kind(mode)})")
        yield handle


def _file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
        stat.S_ISDIR: "a directory",
        stat.S_ISLNK: "a symbolic link",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


def _read_lines(path: Path | str, unique: str | None, skip_damaged: bool) -> JsonlRead:
    path = Path(path)
    with open_run_file(path) as handle:
        if handle is None:
            return JsonlRead([], 0, 0)
        return _parse_lines(path, handle, unique, skip_damaged)


def _parse_lines(path: Path, handle: BinaryIO, unique: str | None, skip_damaged: bool) -> JsonlRead:
    from metewand import canonical

    rows = []
    damaged: list[str] = []
    first_line: dict[Any, int] = {}
    end = number = torn = 0
    while raw := handle.readline(LINE_LIMIT + 1):
        if len(raw) > LINE_LIMIT:
            raise RunDirError(f"{path}:{number + 1}: a line longer than {LINE_LIMIT} bytes")
        if not raw.endswith(b"\n"):
            torn = len(raw)  # a final line cut short by a kill
            break
        number += 1
        end += len(raw)
        try:
            row = canonical.loads(raw[:-1])
            problem = None if isinstance(row, dict) else "row is not an object"
        except (ValueError, RecursionError) as exc:
            problem = f"not a JSON row ({str(exc)[:120]})"
        if problem is not None:
            if not skip_damaged:
                raise RunDirError(f"{path}:{number}: {problem}")
            damaged.append(f"{path}:{number}: {problem}")
            continue
        if unique is not None and isinstance(row.get(unique), str):
            value = row[unique]
            if value in first_line:
                raise RunDirError(
                    f"{path}:{number}: duplicate row for {unique} {value!r} (first at line "
                    f"{first_line[value]}); a row is never counted twice"
                )
            first_line[value] = number
        rows.append(row)
    return JsonlRead(rows, torn, end, tuple(damaged))


def read_json(path: Path | str) -> Any:
    """A run's JSON file, None when absent; damage (not a regular file, larger than
    ``JSON_FILE_LIMIT``, not JSON) is ``RunDirError`` naming the file."""
    from metewand import canonical

    path = Path(path)
    with open_run_file(path) as handle:
        if handle is None:
            return None
        try:
            data = handle.read(JSON_FILE_LIMIT + 1)
        except OSError as exc:
            raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if len(data) > JSON_FILE_LIMIT:
        raise RunDirError(f"{path}: larger than {JSON_FILE_LIMIT} bytes")
    try:
        return canonical.loads(data)
    except (ValueError, RecursionError) as exc:
        raise RunDirError(f"{path}: not valid JSON ({str(exc)[:120]})") from None


def cut_torn_tails(run_dir: Path | str) -> None:
    """Before a resumed run appends again: cut the torn final line of every appended file, so
    the next whole line is not glued to it (which would make it a damaged middle line)."""
    for name in APPENDED:
        path = Path(run_dir) / name
        if name in JOURNALS:
            read = read_journal(path)
        else:
            read = read_jsonl(path, unique="key" if name == RESULTS else None)
        if read.torn_tail_bytes:
            os.truncate(path, read.valid_length)


# -- writing ------------------------------------------------------------------------------------


def process_umask() -> int:
    """This process's umask, read without changing it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def give_normal_mode(fd: int) -> None:
    """mkstemp makes 0600 files; a published file gets what open() would give (0644 usually)."""
    os.fchmod(fd, 0o666 & ~process_umask())


def make_dirs(path: Path) -> list[Path]:
    """``mkdir -p path``; the directories it made, deepest first (none when it was there)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        if not path.is_dir():
            raise
        return []
    except FileNotFoundError:
        if path.parent == path:
            raise
        made = make_dirs(path.parent)
        try:
            os.mkdir(path)
        except FileExistsError:  # another writer made it meanwhile
            return made
        return [path, *made]
    return [path]


def fsync_dir(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path | str, data: bytes) -> None:
    """Replace ``path`` whole: temp file in the same directory, fsync, rename, fsync the
    directory. A reader sees the old file or the new one, never a part; a failure leaves no
    temp file behind."""
    import tempfile

    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        give_normal_mode(fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def publish_dir(
    staging: Path | str,
    final: Path | str,
    *,
    replace: bool,
    sync_parent: bool = True,
    gained: list[Path] | None = None,
) -> bool:
    """Make the staged tree ``final`` whole with one rename, then fsync its parent: a reader (or
    a crash) sees no directory or the whole one, never a part. True when ``staging`` became it.

    A directory already at ``final`` is, with ``replace``, an earlier try's (an attempt that
    died after its artifacts but before its row): it is moved aside first and removed after,
    so the redo wins. Without ``replace`` (a content-addressed cache), it is a concurrent
    writer's copy of the same content: it is kept and ``staging`` removed (False). ``staging``
    never outlives a failed publish. The directories that gained an entry are ``final``'s
    parent and the parent of each directory made on the way to it (a new parent is an entry of
    its own parent: on a filesystem without a journal, syncing only the last one could keep
    ``final`` and lose the path to it). They are fsynced, or with ``sync_parent=False`` left to
    the caller (the run store's group commit syncs them with the next batch of rows);
    ``gained`` receives them."""
    import shutil
    import tempfile

    staging, final = Path(staging), Path(final)
    entries = [final.parent, *(made.parent for made in make_dirs(final.parent))]
    if gained is not None:
        gained.extend(entries)
    aside: Path | None = None
    if replace and final.exists():
        aside = Path(tempfile.mkdtemp(prefix="replaced-", dir=staging.parent))
        os.rename(final, aside / "dir")
    try:
        os.rename(staging, final)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if replace or not final.is_dir():
            raise
        return False
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
    if sync_parent:
        for directory in entries:
            fsync_dir(directory)
    return True


def write_text_atomic(path: Path | str, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path | str, value: Any) -> None:
    """One canonical JSON line, replaced atomically."""
    from metewand import canonical

    write_atomic(path, canonical.line(value))


def append_line(path: Path | str, value: Any) -> None:
    """Append one canonical line with a single ``write`` on an ``O_APPEND`` descriptor (whole
    lines only, short of a power loss; see ``read_jsonl``)."""
    from metewand import canonical

    line = canonical.line(value)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
