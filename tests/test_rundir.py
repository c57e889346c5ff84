"""runtime.rundir, the one owner of a run directory (#14 step 1), on a real compute run.

- One torn-line rule for every JSON-Lines reader: a final line without its newline (a kill
  mid-write) is ignored and reported; a damaged whole line is an error naming file and line (exit
  2 at the CLI), except in the cleanup journals (owned.jsonl, engine_pids.jsonl), where it is
  skipped with a warning naming it so the cleanup still removes what the other lines name.
  Checked on every reader path: status/export/inspect/report over results.jsonl, report over
  host_telemetry.jsonl and cold_start.jsonl, clean over owned.jsonl, the browser leftovers over
  engine_pids.jsonl.
- A resumed run cuts every torn tail before it appends, so a new line is never glued to a torn
  one (which would turn it into a damaged middle line).
- RUN resolution: a directory, an id under OUT, ``latest``, with the refusals' wording.
- Atomic writes: whole file or the old one, normal mode, no temp file left after a failure.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import synthetic_runs as synthetic
from compute_helpers import alive, run
from metewand.compare.rundir import load_run
from metewand.measure import procfs
from metewand.runtime import rundir
from metewand.runtime.store import RunStore
from metewand.suites.browser import leftovers
from test_compute_hostile import hostile_manifest

SRC = Path(__file__).resolve().parent.parent / "src" / "metewand"
TORN = b'{"key": "cut sho'
# every file a run appends to (spelled here, not taken from rundir.APPENDED, so a file dropped
# from that list fails the resume test)
APPENDED = (
    rundir.RESULTS,
    rundir.OWNED,
    rundir.ENGINE_PIDS,
    rundir.HOST_TELEMETRY,
    rundir.COLD_START,
    rundir.LOST_TRIES,
)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real three-attempt compute run with host telemetry; (manifest, run directory)."""
    tmp = tmp_path_factory.mktemp("rundir")
    manifest = hostile_manifest(tmp)
    manifest.write_text(
        manifest.read_text().replace('name = "hostile"', 'name = "hostile"\nrepetitions = 3')
    )
    summary = run(manifest, tmp, host_sample_interval_s=0.1)
    run_dir = Path(summary.run_dir)
    assert len(summary.rows) == 3
    assert len(rundir.read_jsonl(run_dir / rundir.HOST_TELEMETRY).rows) >= 2
    return manifest, run_dir


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "runs" / run_dir.name
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(run_dir), str(target)], check=True)
    return target


def _metewand(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "metewand", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as out:
        out.write(data)


def _damage_first_line(path: Path) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[0] = lines[0][:20] + b"\xff}{" + lines[0][20:]
    path.write_bytes(b"\n".join(lines))


# -- torn tails: ignored and reported --------------------------------------------------------


def test_a_torn_results_line_is_ignored_and_reported_by_every_reader(
    finished: tuple[Path, Path], tmp_path: Path
) -> None:
    _, clean = finished
    run_dir = _copy(clean, tmp_path)
    _append(run_dir / rundir.RESULTS, TORN)
    status = _metewand("status", str(run_dir), "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["torn_tail_bytes"] == len(TORN)
    assert json.loads(status.stdout)["rows"] == 3
    exported = _metewand("export", str(run_dir), "--format", "jsonl")
    assert exported.stdout == _metewand("export", str(clean), "--format", "jsonl").stdout
    key = json.loads(exported.stdout.splitlines()[0])["key"]
    assert _metewand("inspect", str(run_dir), "--key", key, "--json").returncode == 0
    for target in (run_dir, clean):
        out = tmp_path / f"report-{target is clean}"
        done = _metewand("report", str(target), "--format", "md,json,html", "--out", str(out))
        assert done.returncode == 0, done.stderr
    same = (tmp_path / "report-True" / rundir.SCORES).read_bytes()
    assert (tmp_path / "report-False" / rundir.SCORES).read_bytes() == same
    html = (tmp_path / "report-False" / rundir.REPORT).read_text()
    assert "1 torn tail line ignored" in html
    compared = _metewand("compare", str(clean), str(run_dir), "--json", "--resamples", "100")
    assert compared.returncode == 0, compared.stderr
    itself = _metewand("compare", str(clean), str(clean), "--json", "--resamples", "100")
    for part in ("groups", "counts", "warnings"):  # "base"/"new" name the run paths
        assert json.loads(compared.stdout)[part] == json.loads(itself.stdout)[part]
    assert json.loads(compared.stdout)["new"]["rows"] == 3


def test_a_damaged_results_line_is_named_by_compare(
    finished: tuple[Path, Path], tmp_path: Path
) -> None:
    _, clean = finished
    run_dir = _copy(clean, tmp_path)
    _damage_first_line(run_dir / rundir.RESULTS)
    done = _metewand("compare", str(clean), str(run_dir))
    assert done.returncode == 2
    assert f"{rundir.RESULTS}:1: not a JSON row" in done.stderr


@pytest.mark.parametrize("name", [rundir.HOST_TELEMETRY, rundir.COLD_START])
def test_a_torn_side_file_line_is_ignored_and_said_in_the_scorecard(
    finished: tuple[Path, Path], tmp_path: Path, name: str
) -> None:
    _, clean = finished
    run_dir = _copy(clean, tmp_path)
    whole = rundir.read_jsonl(run_dir / name).rows
    _append(run_dir / name, TORN)
    loaded = load_run(run_dir)
    assert loaded.torn_tails == {name: len(TORN)}
    assert (loaded.host_telemetry if name == rundir.HOST_TELEMETRY else loaded.cold_start) == whole
    done = _metewand("report", str(run_dir), "--format", "md", "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "r" / rundir.SCORECARD).read_text()
    assert f"a torn final line was ignored (a write cut short by a kill) in {name}" in card
    assert f"({len(TORN)} bytes)" in card


def _sleeper() -> subprocess.Popen[bytes]:
    """A real process in its own session: what a killed run leaves behind."""
    return subprocess.Popen(["sleep", "300"], start_new_session=True)


@pytest.mark.parametrize("damage", ["torn_tail", "damaged_line"])
def test_clean_kills_what_whole_journal_lines_name(
    finished: tuple[Path, Path], tmp_path: Path, damage: str
) -> None:
    """A journal is read to clean up: past a torn tail (ignored) or a damaged whole line
    (skipped, and named in a warning), clean still kills what the other lines name."""
    _, clean = finished
    run_dir = _copy(clean, tmp_path)
    journal = run_dir / rundir.OWNED
    left = _sleeper()
    try:
        stat = procfs.read_stat(left.pid)
        rundir.append_line(journal, {"kind": "group", "path": "/nonexistent/x"})
        record = {
            "kind": "process",
            "pid": left.pid,
            "starttime": stat.starttime_ticks,
            "session": stat.session,
        }
        rundir.append_line(journal, record)
        if damage == "torn_tail":
            _append(journal, TORN)
        else:
            _damage_first_line(journal)
        done = _metewand("clean", str(run_dir), "--json")
        assert done.returncode == 0, done.stderr
        warned = f"warning: {journal}:1: not a JSON row" in done.stderr
        assert warned == (damage == "damaged_line"), done.stderr
        assert json.loads(done.stdout)["killed"] == [left.pid]
        left.wait(timeout=10)
        assert not alive(left.pid)
    finally:
        if left.poll() is None:
            left.kill()
            left.wait()


def test_engine_pid_records_past_a_torn_tail_are_read(tmp_path: Path) -> None:
    left = _sleeper()
    try:
        leftovers.record_pid(tmp_path, {"pid": left.pid, "engine": "chrome"})
        _append(tmp_path / rundir.ENGINE_PIDS, TORN)
        assert leftovers.recorded_pids(tmp_path) == [left.pid]
        assert leftovers.session_processes(tmp_path) == [left.pid]
    finally:
        left.send_signal(signal.SIGKILL)
        left.wait()


# -- damaged whole lines: named, exit 2 -------------------------------------------------------


@pytest.mark.parametrize("name", [rundir.HOST_TELEMETRY, rundir.COLD_START])
def test_a_damaged_side_file_line_is_named_by_report(
    finished: tuple[Path, Path], tmp_path: Path, name: str
) -> None:
    _, clean = finished
    run_dir = _copy(clean, tmp_path)
    if name == rundir.COLD_START:  # a compute run has none: two real-looking lines
        rundir.append_line(run_dir / name, {"engine": "chrome", "sample": 0})
        rundir.append_line(run_dir / name, {"engine": "chrome", "sample": 1})
    _damage_first_line(run_dir / name)
    done = _metewand("report", str(run_dir), "--format", "md", "--out", str(tmp_path / "r"))
    assert done.returncode == 2
    assert f"{name}:1: not a JSON row" in done.stderr


def test_a_damaged_engine_pid_line_is_skipped_and_named(tmp_path: Path) -> None:
    (tmp_path / rundir.ENGINE_PIDS).write_bytes(b'{"pid": 1\n{"pid": 2, "starttime": 1}\n[3]\n')
    assert leftovers.recorded_pids(tmp_path) == []  # the whole object lacks a session
    warnings = rundir.journal_warnings(tmp_path)
    assert len(warnings) == 2
    assert warnings[0].startswith(f"{tmp_path / rundir.ENGINE_PIDS}:1: not a JSON row")
    assert warnings[1].startswith(f"{tmp_path / rundir.ENGINE_PIDS}:3: row is not an object")
    with pytest.raises(rundir.RunDirError, match=rf"{rundir.ENGINE_PIDS}:1: not a JSON row"):
        rundir.read_jsonl(tmp_path / rundir.ENGINE_PIDS)  # any other reader refuses it


def test_a_whole_line_that_is_not_an_object_or_a_repeated_key_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"key": "a"}\n[1]\n')
    with pytest.raises(rundir.RunDirError, match=r"x.jsonl:2: row is not an object"):
        rundir.read_jsonl(path)
    path.write_bytes(b'{"key": "a"}\n{"key": "a"}\n')
    assert len(rundir.read_jsonl(path).rows) == 2  # only a keyed read refuses repeats
    with pytest.raises(rundir.RunDirError, match=r"x.jsonl:2: duplicate row for key 'a'"):
        rundir.read_jsonl(path, unique="key")
    path.write_bytes(b'{"key": "a"}\n\n')
    with pytest.raises(rundir.RunDirError, match=r"x.jsonl:2: not a JSON row"):
        rundir.read_jsonl(path)


# -- resume: torn tails cut before appending -----------------------------------------------------


def test_a_resumed_run_cuts_every_torn_tail_before_it_appends(
    finished: tuple[Path, Path], tmp_path: Path
) -> None:
    manifest, clean = finished
    run_dir = _copy(clean, tmp_path)
    before = {
        name: (run_dir / name).read_bytes() for name in (rundir.RESULTS, rundir.HOST_TELEMETRY)
    }
    for name in APPENDED:
        _append(run_dir / name, TORN)
    summary = run(manifest, tmp_path, resume=str(run_dir), host_sample_interval_s=0.1)
    assert len(summary.rows) == 0  # every attempt already had its row
    for name in APPENDED:
        read = rundir.read_jsonl(run_dir / name)  # a glued line would raise here
        assert read.torn_tail_bytes == 0, name
    assert (run_dir / rundir.RESULTS).read_bytes() == before[rundir.RESULTS]
    telemetry = (run_dir / rundir.HOST_TELEMETRY).read_bytes()
    assert telemetry.startswith(before[rundir.HOST_TELEMETRY]) and len(telemetry) > len(
        before[rundir.HOST_TELEMETRY]
    )  # the resumed session's samples follow the whole lines of the first one
    done = _metewand("report", str(run_dir), "--format", "md", "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr


def test_the_store_resume_cuts_only_the_torn_tail(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "r1", {"suite": "compute"}) as store:
        store.append({"key": "a", "status": "accepted"})
    _append(tmp_path / "r1" / rundir.RESULTS, TORN)
    _append(tmp_path / "r1" / rundir.HOST_TELEMETRY, b'{"sample": 0}\n' + TORN)
    with RunStore.open(tmp_path / "r1") as store:
        store.append({"key": "b", "status": "accepted"})
    assert [r["key"] for r in rundir.read_jsonl(tmp_path / "r1" / rundir.RESULTS).rows] == [
        "a",
        "b",
    ]
    assert (tmp_path / "r1" / rundir.HOST_TELEMETRY).read_bytes() == b'{"sample": 0}\n'


# -- resolution -----------------------------------------------------------------------------


def _bare_run(runs: Path, run_id: str) -> Path:
    with RunStore.create(runs, run_id, {"suite": "compute"}) as store:
        return store.run_dir


def test_run_names_resolve_by_one_rule(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    older = _bare_run(runs, "older")
    newer = _bare_run(runs, "newer")
    past = time.time() - 60
    os.utime(older / rundir.MANIFEST, (past, past))
    assert rundir.resolve_run_dir(str(older), runs) == older  # a directory
    assert rundir.resolve_run_dir("older", runs) == older.absolute()  # an id under OUT
    assert rundir.resolve_run_dir(rundir.LATEST, runs) == newer.absolute()
    peer = tmp_path / "peer"
    peer.mkdir()
    (peer / rundir.RESULTS).write_bytes(b"")  # a peer's run: results only
    assert rundir.find_run_dir(str(peer), runs) == peer
    with pytest.raises(rundir.RunDirError, match=r"run 'gone': no run directory \(looked in "):
        rundir.resolve_run_dir("gone", runs)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(rundir.RunDirError, match="is not a run directory"):
        rundir.resolve_run_dir(str(plain), runs, what="--resume")
    assert rundir.locate_run_dir(str(plain), runs) == plain
    assert rundir.locate_run_dir("gone", runs) == (runs / "gone").absolute()
    assert rundir.new_run_dir(runs, "newer") == newer
    assert rundir.recorded_run_dir(newer, "older") == runs / "older"
    assert rundir.recorded_run_dir(newer, str(older)) == older


def test_the_cli_resolves_ids_and_latest_against_its_cwd(tmp_path: Path) -> None:
    _bare_run(tmp_path / "runs", "only")
    for name in ("only", rundir.LATEST, "runs/only"):
        done = _metewand("status", name, "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["run_dir"] == str((tmp_path / "runs" / "only").absolute())
    done = _metewand("status", "gone", cwd=tmp_path)
    assert done.returncode == 2
    assert "error: run 'gone': no run directory (looked in " in done.stderr


# -- atomic writes and names ------------------------------------------------------------------


def test_an_atomic_write_replaces_whole_with_a_normal_mode(tmp_path: Path) -> None:
    target = tmp_path / rundir.SCORES
    target.write_bytes(b"old")
    rundir.write_json_atomic(target, {"b": 1, "a": [1, 2]})
    assert target.read_bytes() == b'{"a":[1,2],"b":1}\n'
    assert target.stat().st_mode & 0o777 == 0o666 & ~rundir.process_umask()
    rundir.write_text_atomic(target, "é\n")
    assert target.read_bytes() == "é\n".encode()
    blocked = tmp_path / "adir"
    (blocked / "inside").mkdir(parents=True)  # replacing a non-empty directory fails
    with pytest.raises(OSError):
        rundir.write_atomic(blocked, b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", rundir.SCORES]


def _staged(root: Path, name: str, content: str) -> Path:
    staging = root / ".staging" / name
    (staging / "sub").mkdir(parents=True)
    (staging / "sub" / "f").write_text(content)
    return staging


def test_a_published_directory_is_the_redo_or_the_first_copy(tmp_path: Path) -> None:
    """replace: an earlier try's directory gives way to the redo; keep (a content-addressed
    cache): a concurrent writer's copy stays and ours goes. No staging or aside dir is left."""
    final = tmp_path / "artifacts" / "k"
    assert rundir.publish_dir(_staged(tmp_path, "a", "first"), final, replace=True)
    assert rundir.publish_dir(_staged(tmp_path, "b", "redo"), final, replace=True)
    assert (final / "sub" / "f").read_text() == "redo"
    assert not rundir.publish_dir(_staged(tmp_path, "c", "late"), final, replace=False)
    assert (final / "sub" / "f").read_text() == "redo"
    assert list((tmp_path / ".staging").iterdir()) == []
    (tmp_path / "file").write_text("x")  # a file in the way is no copy of ours: refused
    with pytest.raises(OSError):
        rundir.publish_dir(_staged(tmp_path, "d", "x"), tmp_path / "file", replace=False)
    assert list((tmp_path / ".staging").iterdir()) == []


def test_side_files_live_at_the_top_of_the_run(tmp_path: Path) -> None:
    assert rundir.side_file(tmp_path, rundir.HARNESS_ERROR) == tmp_path / rundir.HARNESS_ERROR
    with pytest.raises(ValueError, match="not a run side file"):
        rundir.side_file(tmp_path, "notes.txt")


NAMES = {
    value
    for name, value in vars(rundir).items()
    if name.isupper() and isinstance(value, str) and "." in value and name != "LATEST"
}


def test_run_directory_file_names_are_spelled_only_in_rundir() -> None:
    """A run-directory file name as a string literal anywhere else is a second owner."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "runtime" / "rundir.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in NAMES:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value!r}")
    assert {rundir.MANIFEST, rundir.RESULTS, rundir.OWNED, rundir.SCORES} <= NAMES
    assert found == []


def test_inspect_names_a_damaged_cdp_log_and_still_shows_the_row(tmp_path: Path) -> None:
    run_dir = synthetic.write_browser_run(tmp_path / "b", n_tasks=1, k=1)
    row = rundir.read_jsonl(run_dir / rundir.RESULTS).rows[0]
    log = run_dir / row["artifacts"]["cdp_log"]
    log.parent.mkdir(parents=True)
    log.write_bytes(b'{"error": {"code": -1}}\n{"id": 2\n' + TORN)
    done = _metewand("inspect", str(run_dir), "--key", row["key"], "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["key"] == row["key"]
    assert f"warning: {log}:2: not a JSON row" in done.stderr
    log.write_bytes(b'{"error": {"code": -1}}\n' + TORN)  # only torn: the whole line counts
    done = _metewand("inspect", str(run_dir), "--key", row["key"], "--json")
    assert json.loads(done.stdout)["last_cdp_errors"] == [{"error": {"code": -1}}]
    assert "warning" not in done.stderr
