"""The run store: whole rows, atomic artifacts, resume after a real kill -9."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metewand import canonical
from metewand.runtime import store as store_mod
from metewand.runtime.store import (
    DuplicateKeyError,
    RunExistsError,
    RunStore,
    RunView,
    StoreError,
)

ATTEMPTS = 40
KILL_AT = 17

# A run that writes each attempt's artifacts in two halves (announcing the first half) and
# then its row. `resume` goes through RunStore.open, exactly as `--resume RUN` does.
WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from metewand.runtime.store import RunStore

    mode, where, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "create":
        store = RunStore.create(where, "killme", {"planned_keys": [f"t/{i}" for i in range(total)]})
    else:
        store = RunStore.open(where)
    done = store.finished_keys()
    for i in range(total):
        key = f"t/{i}"
        if key in done:
            continue
        with store.artifact_dir(key) as staging:
            (staging / "first.txt").write_text(f"first {i}\\n" * 2000)
            print(f"staging {i}", flush=True)
            time.sleep(0.01)
            (staging / "second.txt").write_text(f"second {i}\\n")
        store.append({"key": key, "status": "pass", "attempt": 0, "blob": "x" * 50000, "i": i})
        print(f"appended {i}", flush=True)
    store.set_state("complete")
    store.close()
    """
)


def _run_writer(script: Path, mode: str, where: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), mode, str(where), str(ATTEMPTS)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_kill_9_halfway_then_resume_finishes_every_key_once(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    out = tmp_path / "runs"
    first = _run_writer(script, "create", out)
    assert first.stdout is not None
    for line in first.stdout:
        if line.strip() == f"staging {KILL_AT}":
            os.kill(first.pid, signal.SIGKILL)  # mid-attempt: artifacts half written
            break
    first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL

    run_dir = out / "killme"
    raw = (run_dir / "results.jsonl").read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == KILL_AT  # whole lines only
    assert list((run_dir / ".staging").iterdir()), "the kill should leave a staging dir behind"
    view = RunView(run_dir)
    assert view.state == "running"  # killed: never marked complete
    assert len(view.finished_keys()) == KILL_AT

    second = _run_writer(script, "resume", run_dir)
    stdout, _ = second.communicate(timeout=60)
    assert second.returncode == 0
    redone = [int(m) for m in re.findall(r"appended (\d+)", stdout)]
    assert redone == list(range(KILL_AT, ATTEMPTS))

    rows = RunView(run_dir).rows()
    keys = [row["key"] for row in rows]
    assert sorted(keys) == sorted(f"t/{i}" for i in range(ATTEMPTS))
    assert len(keys) == len(set(keys))
    assert (run_dir / "results.jsonl").read_bytes().endswith(b"\n")
    assert not (run_dir / ".staging").exists()  # no temporary dir outlives the writer
    for i in range(ATTEMPTS):
        artifact = run_dir / "artifacts" / "t" / str(i)
        assert (artifact / "second.txt").read_text() == f"second {i}\n"
    manifest = RunView(run_dir).manifest
    assert manifest["state"] == "complete" and len(manifest["resumed_at"]) == 1


def test_torn_tail_is_ignored_on_read_and_cut_on_resume(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "r1", {}) as store:
        store.append({"key": "a", "status": "pass", "attempt": 0})
    results = tmp_path / "r1" / "results.jsonl"
    with results.open("ab") as handle:  # fault injection: a write the kernel cut short
        handle.write(b'{"attempt":0,"key":"b","sta')
    read = RunView(tmp_path / "r1").read()
    assert [r["key"] for r in read.rows] == ["a"] and read.torn_tail_bytes == 27
    with RunStore.open(tmp_path / "r1") as store:
        assert results.read_bytes() == b'{"attempt":0,"key":"a","status":"pass"}\n'
        store.append({"key": "b", "status": "fail", "attempt": 0})
    assert RunView(tmp_path / "r1").finished_keys() == {"a", "b"}


def test_corrupt_middle_line_is_an_error_not_silence(tmp_path: Path) -> None:
    RunStore.create(tmp_path, "r1", {}).close()
    (tmp_path / "r1" / "results.jsonl").write_bytes(b"garbage\n{}\n")
    with pytest.raises(StoreError, match="results.jsonl:1"):
        RunView(tmp_path / "r1").rows()


def test_duplicate_key_is_refused_also_after_resume(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "r1", {}) as store:
        store.append({"key": "k/0", "status": "pass", "attempt": 0})
        with pytest.raises(DuplicateKeyError):
            store.append({"key": "k/0", "status": "pass", "attempt": 0})
    with RunStore.open(tmp_path / "r1") as store, pytest.raises(DuplicateKeyError):
        store.append({"key": "k/0", "status": "fail", "attempt": 0})
    assert len(RunView(tmp_path / "r1").rows()) == 1


@pytest.mark.parametrize(
    "row",
    [
        {"status": "pass"},
        {"key": "", "status": "pass"},
        {"key": "../escape", "status": "pass"},
        {"key": "a//b", "status": "pass"},
        {"key": "/abs", "status": "pass"},
        {"key": "ok"},
    ],
)
def test_bad_rows_are_refused(tmp_path: Path, row: dict[str, object]) -> None:
    with RunStore.create(tmp_path, "r1", {}) as store, pytest.raises(StoreError):
        store.append(row)


def test_create_refuses_an_existing_run_and_a_second_writer(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "r1", {"x": 1})
    with pytest.raises(RunExistsError):
        RunStore.create(tmp_path, "r1", {})
    with pytest.raises(StoreError, match="another metewand process"):
        RunStore.open(tmp_path / "r1")
    store.close()
    RunStore.open(tmp_path / "r1").close()
    with pytest.raises(StoreError, match="not a run directory"):
        RunStore.open(tmp_path)


def test_generated_run_ids_are_timestamped_and_distinct(tmp_path: Path) -> None:
    ids = {store_mod.new_run_id() for _ in range(20)}
    assert len(ids) == 20
    assert all(re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", run_id) for run_id in ids)
    with RunStore.create(tmp_path, None, {}) as store:
        assert store.run_dir.parent == tmp_path and store.run_id == store.run_dir.name
    with pytest.raises(StoreError, match="invalid run id"):
        RunStore.create(tmp_path, "../x", {})


def test_failed_artifact_block_leaves_nothing(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "r1", {}) as store:
        with pytest.raises(RuntimeError), store.artifact_dir("k/0") as staging:
            (staging / "partial.txt").write_text("half")
            raise RuntimeError("attempt blew up")
        assert not store.artifact_path("k/0").exists()
        assert not list((store.run_dir / ".staging").iterdir())


def test_redone_attempt_replaces_orphan_artifacts(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "r1", {}) as store:
        with store.artifact_dir("k/0") as staging:
            (staging / "old.txt").write_text("old")
        # No row was appended: the attempt is unfinished and will be redone.
        with store.artifact_dir("k/0") as staging:
            (staging / "new.txt").write_text("new")
        names = sorted(p.name for p in store.artifact_path("k/0").iterdir())
        assert names == ["new.txt"]
        assert not list((store.run_dir / ".staging").iterdir())


def test_manifest_states_and_updates_are_atomic_files(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "r1", {"host": {"a": 1}}) as store:
        assert store.state == "running"
        store.update_manifest({"planned_keys": ["x"]})
        store.set_state("interrupted")
        with pytest.raises(StoreError):
            store.set_state("done")
    manifest_path = tmp_path / "r1" / "run_manifest.json"
    raw = manifest_path.read_bytes()
    manifest = canonical.loads(raw)
    assert raw == canonical.line(manifest)  # canonical JSON on disk
    assert manifest["state"] == "interrupted"
    assert manifest["data"] == {"host": {"a": 1}, "planned_keys": ["x"]}
    assert manifest["schema"] == "metewand_run_manifest/1"
    leftovers = [p.name for p in (tmp_path / "r1").iterdir() if p.name.startswith(".run_manifest")]
    assert leftovers == []


def test_rows_are_canonical_lines(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "r1", {}) as store:
        store.append({"status": "pass", "key": "z", "attempt": 0, "nested": {"b": 1, "a": 2}})
    raw = (tmp_path / "r1" / "results.jsonl").read_bytes()
    assert raw == b'{"attempt":0,"key":"z","nested":{"a":2,"b":1},"status":"pass"}\n'
