"""The run store's group commit: rows reach the kernel at once, the disk off the attempts' path,
and always before a state change and at close; an fsync that fails fails the run."""

from __future__ import annotations

import errno
import os
import threading
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
