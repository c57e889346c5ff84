"""The run store's group commit: rows reach the kernel at once, the disk off the attempts' path,
and always before a state change and at close; an fsync that fails fails the run."""

from __future__ import annotations

import errno
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from metewand.runtime import flusher as flusher_mod
from metewand.runtime.store import RunStore, RunView, StoreError


class FsyncLog:
    """Records what was fsynced and when (the real fsync still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> None:
        self.calls: list[int] = []
        self.fail = fail
        self.passed = threading.Event()
        real = os.fsync

        def fsync(fd: int) -> None:
            if self.fail:
                raise OSError(errno.EIO, "injected: the disk refused the write")
            real(fd)
            self.calls.append(fd)
            self.passed.set()

        monkeypatch.setattr(flusher_mod.os, "fsync", fsync)


def test_rows_are_readable_at_once_and_fsynced_in_a_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flusher_mod, "FLUSH_INTERVAL_S", 30.0)
    log = FsyncLog(monkeypatch)
    store = RunStore.create(tmp_path, "flush", {})
    try:
        store._flusher._interval_s = 30.0  # one pass, then a long rest: the batch is visible
        for i in range(20):
            with store.artifact_dir(f"t/{i}") as staging:
                (staging / "a.txt").write_text("x")
            store.append({"key": f"t/{i}", "status": "pass", "attempt": 1})
            # another reader sees the row and its artifacts now: the kernel holds them
            assert len(RunView(store.run_dir).rows()) == i + 1
            assert (store.artifact_path(f"t/{i}") / "a.txt").read_text() == "x"
        assert log.passed.wait(10), "the flusher never ran"
        assert 1 <= len(log.calls) < 20  # far fewer fsyncs than rows (one pass, then a rest)
        before = len(log.calls)
        store.set_state("complete")  # a state change waits for the rows to be durable
        assert len(log.calls) > before
    finally:
        store.close()


def test_close_makes_the_last_row_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = FsyncLog(monkeypatch)
    store = RunStore.create(tmp_path, "close", {})
    results_fd = store._fd
    store._flusher._interval_s = 30.0
    store.append({"key": "t/1", "status": "pass", "attempt": 1})
    assert log.passed.wait(10)
    store.append({"key": "t/2", "status": "pass", "attempt": 1})  # lands in the rest
    count = log.calls.count(results_fd)
    store.close()
    # at least one fsync of the results file after the last append (in a process that ran other
    # tests, a descriptor number may be fsynced by their stores too: not "exactly one")
    assert log.calls.count(results_fd) >= count + 1


def test_a_failed_fsync_fails_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = FsyncLog(monkeypatch)
    store = RunStore.create(tmp_path, "eio", {})
    log.fail = True
    try:
        store.append({"key": "t/1", "status": "pass", "attempt": 1})
        with pytest.raises(StoreError, match="could not be made durable"):
            store._flusher.flush()
        log.fail = False
        store.append({"key": "t/2", "status": "pass", "attempt": 1})  # raised once, then on
        log.fail = True
        store.append({"key": "t/3", "status": "pass", "attempt": 1})
        deadline = threading.Event()
        while store._flusher._error is None and not deadline.wait(0.01):
            pass
        with pytest.raises(StoreError, match="injected"):
            store.append({"key": "t/4", "status": "pass", "attempt": 1})
    finally:
        log.fail = False
        store.close()


# A child that notes writes in a tight loop while Ctrl-C keeps arriving. The handler raises only
# while a note is under way, so every KeyboardInterrupt lands inside ``note`` (anywhere in it) and
# is caught, as a run's interrupted attempt is caught and its store then closed.
_INTERRUPTED_NOTER = """
import os, signal, sys, time
from metewand.runtime.flusher import Flusher

fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
flusher = Flusher(fd, interval_s=0.001)
inside = False
interrupts = 0

def interrupt(signum, frame):
    if inside:
        raise KeyboardInterrupt

def noting(end):
    global inside
    while time.monotonic() < end:
        inside = True
        flusher.note()
        inside = False

signal.signal(signal.SIGINT, interrupt)
end = time.monotonic() + float(sys.argv[2])
print("ready", flush=True)
while time.monotonic() < end:
    try:
        noting(end)
    except KeyboardInterrupt:
        inside = False
        interrupts += 1
flusher.close()
print(interrupts, flush=True)
"""


def test_ctrl_c_during_note_never_leaves_close_waiting_forever(tmp_path: Path) -> None:
    """A KeyboardInterrupt can land on any bytecode of the main thread, including the one right
    after a lock was taken inside a Python-level ``__enter__`` (``threading.Condition``'s), which
    then stays held: the flusher thread waited for it forever and ``close`` with it (a Ctrl-C'd
    Dask run hung so in CI). ``note`` must take no such lock; 200 interrupts during notes, then
    ``close`` returns."""
    child = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED_NOTER, str(tmp_path / "rows"), "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for _ in range(200):
            child.send_signal(signal.SIGINT)
            time.sleep(0.005)
        out, _ = child.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("close() never returned after Ctrl-C during note(): a lock was left held")
    assert child.returncode == 0
    assert int(out.strip()) >= 100  # most interrupts landed inside a note


class CountingQueue:
    """The flusher's wake-up queue, counting the wake-ups its notes sent."""

    def __init__(self) -> None:
        self.inner: queue.SimpleQueue[None] = queue.SimpleQueue()
        self.puts = 0

    def put(self, item: None) -> None:
        self.puts += 1
        self.inner.put(item)

    def get(self, timeout: float | None = None) -> None:
        return self.inner.get(timeout=timeout)


def test_notes_while_a_pass_is_pending_wake_the_thread_once_and_still_reach_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = FsyncLog(monkeypatch)
    fd = os.open(tmp_path / "rows", os.O_WRONLY | os.O_CREAT, 0o644)
    flusher = flusher_mod.Flusher(fd, interval_s=0.5)
    wake = CountingQueue()
    flusher._wake = wake  # type: ignore[assignment]
    try:
        flusher.note()
        assert log.passed.wait(10), "the first pass never ran"
        log.passed.clear()
        for _ in range(50):  # during the rest: one wake-up for the burst, not one per note
            flusher.note(tmp_path)
        assert wake.puts <= 2
        # the burst's pass syncs the noted dir, then the rows: wait for the rows' second sync
        deadline = time.monotonic() + 10
        while log.calls.count(fd) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log.calls.count(fd) == 2, "what was noted during the rest never reached the disk"
    finally:
        flusher.close()
        os.close(fd)


def test_every_directory_that_gained_an_entry_reaches_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A published artifact dir's new parents are entries in their own parents: each of those
    directories is synced too, or a power cut on a filesystem without a journal could keep a
    row and lose the path to its artifacts."""
    synced: list[str] = []
    real = flusher_mod.fsync_dir

    def fsync_dir(path: str) -> None:
        real(path)
        synced.append(str(Path(path).relative_to(store.run_dir)))

    monkeypatch.setattr(flusher_mod, "fsync_dir", fsync_dir)
    store = RunStore.create(tmp_path, "parents", {})
    try:
        store._flusher._interval_s = 30.0
        for key in ("L1/s/t1/chrome/1", "L1/s/t1/chrome/2", "L1/s/t2/chrome/1"):
            with store.artifact_dir(key) as staging:
                (staging / "a.txt").write_text("x")
            store.append({"key": key, "status": "pass", "attempt": 1})
            store._flusher.flush()
            assert (store.artifact_path(key) / "a.txt").read_text() == "x"
            synced.append("|")
    finally:
        store.close()
    passes = "\n".join(synced).split("\n|")
    first, second, third = (sorted(filter(None, p.split("\n"))) for p in passes[:3])
    # the first key made artifacts/ (an entry of the run dir's) and every level under it
    assert first == [
        ".",
        "artifacts",
        "artifacts/L1",
        "artifacts/L1/s",
        "artifacts/L1/s/t1",
        "artifacts/L1/s/t1/chrome",
    ]
    assert second == ["artifacts/L1/s/t1/chrome"]  # only the attempt's entry is new
    assert third == ["artifacts/L1/s", "artifacts/L1/s/t2", "artifacts/L1/s/t2/chrome"]


def test_make_dirs_names_what_it_made(tmp_path: Path) -> None:
    from metewand.runtime.rundir import make_dirs

    deep = tmp_path / "a" / "b" / "c"
    assert make_dirs(deep) == [deep, deep.parent, deep.parent.parent]
    assert make_dirs(deep) == []
    assert make_dirs(deep / "d") == [deep / "d"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        make_dirs(tmp_path / "file")
    with pytest.raises(NotADirectoryError):
        make_dirs(tmp_path / "file" / "under")
