"""The run store's write-behind: an attempt's last files, its artifact dir's rename and its row
are written on the store's thread, in order, while the caller goes on; a failed write drops
what depends on it and fails the run."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from metewand.runtime import write_behind
from metewand.runtime.store import RunStore, RunView, StoreError
from metewand.runtime.write_behind import WriteBehind


def _held(store: RunStore) -> threading.Event:
    """Hold the store's writer thread until the returned event is set."""
    release = threading.Event()
    store._behind.submit(lambda: release.wait(30))
    return release


def test_an_attempt_is_handed_over_without_waiting_for_the_disk_and_lands_in_order(
    tmp_path: Path,
) -> None:
    with RunStore.create(tmp_path, "r", {}) as store:
        release = _held(store)
        with store.artifact_dir("t/1") as staging:
            store.write_later(staging / "cdp.jsonl", b"{}\n")
        store.append({"key": "t/1", "status": "pass", "attempt": 1})
        # the writer is held: the caller got here with nothing of the attempt written yet
        assert not store.artifact_path("t/1").exists()
        assert RunView(store.run_dir).rows() == []
        release.set()
        assert [row["key"] for row in store.rows()] == ["t/1"]  # a store's own read drains
        assert (store.artifact_path("t/1") / "cdp.jsonl").read_bytes() == b"{}\n"


def test_a_failed_write_drops_the_dir_and_row_behind_it_and_fails_the_run(
    tmp_path: Path,
) -> None:
    store = RunStore.create(tmp_path, "r", {})
    try:
        with store.artifact_dir("t/1") as staging:
            store.write_later(staging / "missing-subdir" / "a.txt", b"x")  # the write fails
        store.append({"key": "t/1", "status": "pass", "attempt": 1})
        store.drain()
        assert not store.artifact_path("t/1").exists()  # never published
        assert RunView(store.run_dir).rows() == []  # and no row that would name it
        with pytest.raises(StoreError, match="could not be written"):
            store.append({"key": "t/2", "status": "pass", "attempt": 1})
        with pytest.raises(StoreError, match="could not be written"):
            store.set_state("complete")
        assert RunView(store.run_dir).state == "running"
    finally:
        with pytest.raises(StoreError, match="could not be written"):
            store.close()
    assert RunView(tmp_path / "r").rows() == []
    assert not list((tmp_path / "r" / ".staging").glob("*")), "close leaves no staging dir"


def test_a_full_queue_makes_the_caller_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(write_behind, "MAX_QUEUED", 4)
    behind = WriteBehind("test-write-behind")
    release = threading.Event()
    done: list[int] = []
    behind.submit(lambda: release.wait(30))
    submitter = threading.Thread(
        target=lambda: [behind.submit(lambda i=i: done.append(i)) for i in range(10)]
    )
    submitter.start()
    submitter.join(0.3)
    assert submitter.is_alive(), "ten jobs were queued behind a held writer, past the bound"
    release.set()
    submitter.join(30)
    behind.close()
    assert done == list(range(10))


def test_the_writer_threads_cpu_is_its_own_clock() -> None:
    behind = WriteBehind("test-write-behind")
    assert behind.cpu_ns() == 0  # no thread yet
    spent: list[int] = []

    def busy() -> None:
        start = time.thread_time_ns()
        while time.thread_time_ns() - start < 20_000_000:
            pass
        spent.append(time.thread_time_ns() - start)

    behind.submit(busy)
    behind.drain()
    after = behind.cpu_ns()
    assert after >= spent[0] >= 20_000_000
    behind.close()


def test_drain_on_an_idle_writer_does_not_wake_it() -> None:
    """A slot drains before every attempt; with nothing queued that costs no round trip."""
    behind = WriteBehind("test-write-behind")
    release = threading.Event()
    behind.submit(lambda: release.wait(30))
    assert not behind.idle()
    release.set()
    behind.drain()
    assert behind.idle()
    round_trips: list[int] = []
    real_wait = behind._wait
    behind._wait = lambda: round_trips.append(1)  # type: ignore[method-assign]
    behind.drain()
    assert round_trips == []
    behind._wait = real_wait  # type: ignore[method-assign]
    behind.close()
