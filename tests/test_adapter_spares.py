"""Per-attempt adapters started ahead (suites/browser/adapter_spares.py): real adapter processes
(small Python programs), real cgroups, real gate shells.

The adapter reports its pid and its cgroup2 path; the gate shell execs it, so an adapter that
ran from a spare has the spare's pid and the spare's group."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import alive
from metewand.measure import gate
from metewand.measure.accounting import AccountingUnavailable, open_accounting
from metewand.runtime.owned import OwnedJournal
from metewand.suites.browser.adapter_spares import AdapterSpares
from metewand.suites.browser.adapters import AdapterCommand, AdapterRun, run_adapter
from metewand.suites.browser.op_marks import PAYLOAD_KEY, MarkSink

PAYLOAD = {"protocol": "abb_scenario_adapter/1", "steps": [], "checks": []}
LABEL = "adapter-spare-test"


def _groups_or_skip() -> None:
    try:
        accounting = open_accounting("auto", label="spare-probe")
    except AccountingUnavailable as exc:
        pytest.skip(f"no accounting groups here: {exc}")
    usable = gate.can_join(accounting)
    accounting.close()
    if not usable:
        pytest.skip("no cgroup accounting to start a gated adapter in")


def adapter(tmp_path: Path, name: str = "adapter.py") -> AdapterCommand:
    """An adapter that reads its payload, marks one op when given a channel, says something
    on stderr and reports its pid and cgroups."""
    script = tmp_path / name
    script.write_text(
        textwrap.dedent(
            f"""
            import json, os, sys
            payload = json.loads(sys.stdin.read())
            fd = payload.get({PAYLOAD_KEY!r})
            if fd is not None:
                os.write(fd, b"op0:evaluate\\n\\n")
            print("adapter", os.getpid(), "was here", file=sys.stderr)
            groups = open("/proc/self/cgroup").read()
            print(json.dumps({{"ok": True, "checks": [], "observations":
                {{"pid": os.getpid(), "cgroup": groups}}}}))
            """
        )
    )
    return AdapterCommand((sys.executable, str(script)))


async def _attempts(
    command: AdapterCommand, tmp_path: Path, spares: AdapterSpares, marks: list[Any]
) -> list[tuple[AdapterRun, int | None]]:
    """One attempt per entry of ``marks`` (its marker, or None) on one loop (as a slot runs
    them), each with the pid of the spare that was waiting when it began; then the spares
    closed."""
    out = []
    try:
        for n, mark in enumerate(marks):
            waiting = spares.waiting
            run = await run_adapter(
                command,
                PAYLOAD,
                20.0,
                tmp_path / f"a{n}" / "stderr.txt",
                LABEL,
                spares.journal,
                None if mark is None else MarkSink(mark),
                spares,
            )
            out.append((run, waiting.process.pid if waiting is not None else None))
    finally:
        await spares.close()
    return out


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def _unified_group(run: AdapterRun) -> str:
    assert run.result is not None
    lines = str(run.result["observations"]["cgroup"]).splitlines()
    return next(line.split(":", 2)[2] for line in lines if line.startswith("0::"))


def test_the_next_attempt_runs_in_the_spare_started_during_this_one(tmp_path: Path) -> None:
    _groups_or_skip()
    stage = tmp_path / "stage"
    spares = AdapterSpares(stage, OwnedJournal(tmp_path))
    seen: list[str] = []
    runs = asyncio.run(_attempts(adapter(tmp_path), tmp_path, spares, [seen.append] * 3))
    assert [r.outcome for r, _ in runs] == ["result"] * 3
    assert runs[0][1] is None  # the first attempt had no spare: it started its own
    for run, spare_pid in runs[1:]:
        assert spare_pid is not None
        assert run.result is not None and run.result["observations"]["pid"] == spare_pid
        assert LABEL in _unified_group(run)  # the spare's own fresh group
        assert run.cpu_ns is not None and run.cpu_ns.status.value == "complete"
        assert run.cpu_ns.value is not None and run.cpu_ns.value > 0
    assert spares.taken == 2 and spares.discarded == 1  # the last spare, at close
    assert len({_unified_group(r) for r, _ in runs}) == 3  # a fresh group every attempt
    for n, (run, _) in enumerate(runs):  # each attempt's stderr is its own, where it asked
        text = (tmp_path / f"a{n}" / "stderr.txt").read_text()
        assert f"adapter {run.result['observations']['pid']} was here" in text  # type: ignore[index]
    assert seen.count("op0:evaluate") == 3  # every attempt's mark came through its channel
    assert list(stage.iterdir()) == []  # the discarded spare's stderr file went with it


def test_a_spare_for_another_command_is_discarded_and_the_attempt_starts_its_own(
    tmp_path: Path,
) -> None:
    _groups_or_skip()
    spares = AdapterSpares(tmp_path / "stage")

    async def two_commands() -> tuple[AdapterRun, int, str]:
        try:
            await run_adapter(
                adapter(tmp_path, "a.py"),
                PAYLOAD,
                20.0,
                tmp_path / "a" / "e",
                LABEL,
                None,
                None,
                spares,
            )
            waiting = spares.waiting
            assert waiting is not None and waiting.accounting is not None
            while not spares._spare.joined.done():  # type: ignore[union-attr]  # the move
                await asyncio.sleep(0.01)
            group = waiting.accounting.groups[0].path  # type: ignore[attr-defined]
            other = await run_adapter(
                adapter(tmp_path, "b.py"),
                PAYLOAD,
                20.0,
                tmp_path / "b" / "e",
                LABEL,
                None,
                None,
                spares,
            )
            return other, waiting.process.pid, group
        finally:
            await spares.close()

    run, spare_pid, spare_group = asyncio.run(two_commands())
    assert run.outcome == "result"
    assert run.result is not None and run.result["observations"]["pid"] != spare_pid
    assert spares.taken == 0 and spares.discarded == 2  # a.py's at b.py's start, b.py's at close
    assert _gone(spare_pid)
    assert not os.path.exists(spare_group)  # its groups removed with it


def test_a_spare_killed_while_it_waited_is_not_used(tmp_path: Path) -> None:
    _groups_or_skip()
    spares = AdapterSpares(tmp_path / "stage")
    command = adapter(tmp_path)

    async def killed_spare() -> tuple[AdapterRun, int]:
        try:
            await run_adapter(
                command, PAYLOAD, 20.0, tmp_path / "a" / "e", LABEL, None, None, spares
            )
            waiting = spares.waiting
            assert waiting is not None
            os.kill(waiting.process.pid, signal.SIGKILL)  # e.g. the OOM killer, or an operator
            await waiting.process.wait_exited_async(5.0)
            run = await run_adapter(
                command, PAYLOAD, 20.0, tmp_path / "b" / "e", LABEL, None, None, spares
            )
            return run, waiting.process.pid
        finally:
            await spares.close()

    run, dead = asyncio.run(killed_spare())
    assert run.outcome == "result"  # the attempt started its own adapter
    assert run.result is not None and run.result["observations"]["pid"] != dead
    assert spares.taken == 0 and spares.discarded == 2


def test_a_waiting_spare_is_in_the_runs_journal(tmp_path: Path) -> None:
    """A runner killed while a spare waits leaves records the resume sweep finds it by: its
    groups from before they were made, its process once moved into them."""
    _groups_or_skip()
    journal = OwnedJournal(tmp_path)
    spares = AdapterSpares(tmp_path / "stage", journal)

    async def one() -> tuple[int, list[str]]:
        try:
            await run_adapter(
                adapter(tmp_path), PAYLOAD, 20.0, tmp_path / "a" / "e", LABEL, journal, None, spares
            )
            waiting = spares.waiting
            assert waiting is not None and waiting.accounting is not None
            while not spares._spare.joined.done():  # type: ignore[union-attr]  # the move
                await asyncio.sleep(0.01)
            paths = [g.path for g in waiting.accounting.groups]  # type: ignore[attr-defined]
            return waiting.process.pid, paths
        finally:
            await spares.close()

    pid, paths = asyncio.run(one())
    owned = (tmp_path / "owned.jsonl").read_text()
    assert f'"pid":{pid}' in owned.replace(" ", "")
    for path in paths:
        assert path in owned


def test_an_attempt_without_marks_takes_a_spare_and_is_not_told_of_its_channel(
    tmp_path: Path,
) -> None:
    """An interleaved calibration's unobserved twin and its observed attempt alternate: each
    takes the spare the other left, and only the observed one's adapter hears of a channel."""
    _groups_or_skip()
    spares = AdapterSpares(tmp_path / "stage")
    seen: list[str] = []
    marks = [seen.append, None, seen.append, None]
    runs = asyncio.run(_attempts(adapter(tmp_path), tmp_path, spares, marks))
    assert [r.outcome for r, _ in runs] == ["result"] * 4
    assert spares.taken == 3
    assert seen.count("op0:evaluate") == 2  # the two observed attempts' marks, no more
    assert [r.op_marks is not None for r, _ in runs] == [True, False, True, False]


def test_a_spare_that_cannot_be_made_leaves_the_attempts_to_start_their_own(
    tmp_path: Path,
) -> None:
    _groups_or_skip()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the staging dir would be")
    spares = AdapterSpares(blocker / "stage")
    runs = asyncio.run(_attempts(adapter(tmp_path), tmp_path, spares, [None, None]))
    assert [r.outcome for r, _ in runs] == ["result", "result"]
    assert [spare for _, spare in runs] == [None, None]
    assert spares.taken == 0 and spares.last_error is not None
    assert "NotADirectoryError" in spares.last_error or "FileExistsError" in spares.last_error
