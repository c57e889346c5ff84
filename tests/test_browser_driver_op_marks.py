"""Driver-op marks (issue #16): a driver path's adapter marks each op over the mark channel
(``suites/browser/op_marks.py``) and each op becomes a phase of the attempt, on real Chrome in a
real accounting group, through a Node adapter (chrome-remote-interface) and a Python adapter
(cdp-use), each per attempt and served (long-lived).

The burn: one ``evaluate`` op runs a fixed-work loop (~300 ms of renderer CPU, the same loop as
``test_browser_phases``); its engine CPU must land in that op's phase. The witness is the
scheduler's own per-thread run time (``/proc/<pid>/task/<tid>/schedstat``), read after each mark:
the loop's run time is the busiest thread's from the mark before it (``1+1``) to the one after
(``2+2``); the group's CPU in the burn op is at least 95% of it and the neighbouring ops' group
CPU less than the burn op's. The phases plus the stretches between marks add up to the total
exactly.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_engine_fixtures import resolved_or_skip
from browser_run_helpers import driver_corpus, driver_task
from metewand.measure.accounting import TreeAccounting, open_accounting
from metewand.runtime.schemas import violations
from metewand.suites.browser.adapter_attempt import AdapterAttempt, engine_endpoint
from metewand.suites.browser.adapter_attempt import run_adapter_attempt as run_attempt
from metewand.suites.browser.adapter_server import AdapterRunner, open_adapter
from metewand.suites.browser.driver_registry import DriverMissing, FoundDriver, resolve_driver
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.op_marks import MarkSink
from metewand.suites.browser.phase_marks import AttemptPhases
from metewand.suites.browser.tasks import load_corpus
from test_browser_phases import BURN, _thread_cpu

pytestmark = pytest.mark.engines

PATHS = {  # driver path -> (task driver kind, subset)
    "chrome_remote_interface": ("thin_chrome_remote_interface", "l1.chrome_remote_interface"),
    "cdp_use": ("thin_cdp_use", "l1.cdp_use"),
}
BURN_OP = "op2:evaluate"
OPS = ["op0:new_page", "op1:evaluate", BURN_OP, "op3:evaluate"]
# an attempt's phases when its adapter marked its ops
MARKED = ["target_snapshot", "adapter_run", "driver_connect", *OPS, "driver_close", "grade"]


def _task(key: str) -> dict[str, Any]:
    checks: list[dict[str, Any]] = [
        {"kind": "step_ok", "label": f"step{i}_ok", "step": i} for i in range(4)
    ]
    return driver_task(
        f"burn_{key}",
        PATHS[key],
        [
            {"op": "new_page"},
            {"op": "evaluate", "expression": "1+1"},
            {"op": "evaluate", "expression": BURN, "save_as": "burnt"},
            {"op": "evaluate", "expression": "2+2"},
        ],
        [*checks, {"kind": "saved_equals", "label": "burnt", "name": "burnt", "expected": "true"}],
        "Three evaluates on a fresh page, the middle one a fixed-work loop.",
    )


def _corpus(root: Path) -> Path:
    """A tiny corpus holding one burn task per driver path, with the peer's binding catalog."""
    return driver_corpus(root, {f"burn_{key}": _task(key) for key in PATHS})


class Witnessed(AttemptPhases):
    """The suite's marks, with every thread's schedstat read right after each one. With
    ``by_adapter`` False the adapter's lines come through here too: the harness reads the
    counters as each arrives (``read_by: harness``), which is what the witness can follow. With
    it True the adapter reads them itself (``read_by: adapter``) and only the harness's own
    marks are witnessed."""

    def __init__(self, group: TreeAccounting, by_adapter: bool = False) -> None:
        super().__init__(group, "adapter_run", concurrent=False)
        self.group = group
        self.by_adapter = by_adapter
        self.witness: list[tuple[str | None, dict[tuple[int, int], int]]] = []

    def mark(self, name: str | None) -> None:
        super().mark(name)
        self.witness.append((name, _thread_cpu(self.group.pids())))

    def sink(self) -> MarkSink:
        return super().sink() if self.by_adapter else MarkSink(self.mark)


@pytest.fixture(scope="module")
def chrome_in_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    resolved = resolved_or_skip("chrome")
    group = open_accounting(label=f"op-marks-test-{os.getpid()}")
    logs = tmp_path_factory.mktemp("op-marks-logs")
    process = EngineProcess(resolved, logs, preexec_fn=group.preexec_join())
    asyncio.run(process.start())
    assert process.pid is not None
    group.attach(process.pid)
    try:
        yield process, group
    finally:
        report = asyncio.run(process.stop())
        group.close()
        assert report.clean, report


def _found(key: str) -> FoundDriver:
    found = resolve_driver(key)
    if isinstance(found, DriverMissing):
        pytest.skip(f"{key}: {found.detail}")
    return found


async def _attempts(
    process: EngineProcess,
    group: TreeAccounting,
    key: str,
    mode: str,
    root: Path,
    work: Path,
    by_adapter: bool = False,
) -> list[tuple[Witnessed, Any, dict[str, Any]]]:
    """Two attempts through one runner (a served adapter answers both), each witnessed."""
    task = next(t for t in load_corpus(root).tasks if t.task_id == f"burn_{key}")
    found = _found(key)
    runner = open_adapter(found.command, mode, f"adapter-{key}", work / "served.log")
    endpoint = await engine_endpoint("chrome", process)

    async def runner_for(_found: FoundDriver) -> tuple[AdapterRunner, str]:
        return runner, mode

    out = []
    try:
        for attempt in (1, 2):
            phases = Witnessed(group, by_adapter)
            # a context of the attempt's own, as these checks were made under: with the default
            # (cleared) the fresh page's own set-up on a spare renderer can run on into op1 and
            # on the burner's thread, which the witness then counts in the burn (0.85 seen)
            ids = AdapterAttempt(
                "op-marks", attempt, "s0", "http://127.0.0.1:9", isolation="context"
            )
            outcome = await run_attempt(
                task,
                endpoint,
                work / f"{mode}-{attempt}",
                ids,
                runner_for=runner_for,
                phases=phases,
            )
            assert outcome.status == "pass", (outcome.reason, outcome.checks)
            out.append((phases, outcome, outcome.row_fields))
    finally:
        await runner.close()
    return out


def _cpu(phase: dict[str, Any]) -> int:
    form = phase["cpu_time_ns"]
    assert form["status"] == "complete", form
    return int(form["value"])


@pytest.mark.parametrize("mode", ["per_attempt", "long_lived"])
@pytest.mark.parametrize("key", sorted(PATHS))
def test_each_driver_op_is_a_phase_and_the_busy_op_carries_the_burn(
    chrome_in_group: Any, tmp_path: Path, key: str, mode: str
) -> None:
    """Each op a phase, the burn in its op: first read by the harness as each line arrives,
    where a witness can follow it; then read by the adapter itself, whose burn op must hold at
    least 3/4 of the loop the witnessed attempts measured."""
    process, group = chrome_in_group
    root = _corpus(tmp_path / "corpus")
    late: list[AssertionError] = []
    for attempt in range(TRIES):  # a try the host delayed is run again; late every time fails
        work = tmp_path / f"work{attempt}"
        try:
            burns = []
            for phases, _outcome, block in asyncio.run(
                _attempts(process, group, key, mode, root, work)
            ):
                assert block["adapter_mode"] == mode
                burns.append(_check_attempt(phases, f"{key} {mode}"))
            for phases, _outcome, block in asyncio.run(
                _attempts(process, group, key, mode, root, work / "by-adapter", by_adapter=True)
            ):
                assert block["adapter_mode"] == mode
                _check_read_by_adapter(phases, min(burns), f"{key} {mode} read by the adapter")
            return
        except (LateWitness, BusyNeighbour, LostWitness) as exc:
            late.append(exc)
    reasons = [f"{type(exc).__name__}: {exc}" for exc in late]
    if all(isinstance(exc, LostWitness) for exc in late):
        pytest.skip(f"every try's witness lost a process of the group during the burn: {reasons}")
    pytest.fail(f"every try's burn was read late, beside Chrome's own work or unseen: {reasons}")


TRIES = 3


class BusyNeighbour(AssertionError):
    """A neighbouring op held more of the group's CPU than the burn op, and the loop's thread was
    not what ran there: Chrome's own work (CI at load ~5 once: op1 970 ms while its loop thread
    was idle, the burn op 514 ms). Run again like a late reading; a burn found in the wrong op
    fails at once."""


class LostWitness(AssertionError):
    """A process of the group exited between op1's and op3's witness, so its threads could not
    be read and the burning thread may be among them (seen at load ~7, twice in 8 runs; once in
    a quiet CI run). Run again like a late reading: a skip only when every try lost one."""


class LateWitness(AssertionError):
    """The loop's CPU fell before op1's witness: the mark reached the harness after the burn (CI
    at load ~4 once: op0:new_page held 1,369 ms of engine CPU, the burn op 80). What is marked
    where is checked by every try; the timing of one reading is not what this test is about."""


def _check_attempt(phases: Witnessed, label: str) -> int:
    """The witnessed checks of an attempt whose lines the harness read; the loop's CPU (ns)."""
    record = phases.to_json()
    assert violations("metewand_browser_attempt_phases-1", record) == []
    assert record["granularity"] == "driver_ops"
    # driver_connect, four ops, driver_close; nothing refused
    assert record["driver_marks"] == {"received": 6, "refused": 0, "read_by": "harness"}
    for role in ("engine", "harness"):
        assert [p["name"] for p in record[role]["phases"]] == MARKED, role
    engine = record["engine"]
    by_name = {p["name"]: p for p in engine["phases"]}
    marks = [name for name, _ in phases.witness]

    def grown(first: str, last: str) -> dict[tuple[int, int], int]:
        """Each thread's run time from the witness at ``first``'s mark to the one at ``last``'s."""
        start, end = phases.witness[marks.index(first)][1], phases.witness[marks.index(last)][1]
        return {k: end[k] - start.get(k, 0) for k in end}

    # The witness is read after each mark, while the adapter goes on with its op (it is another
    # process): at op2's mark the loop may already be running as the threads are listed. So the
    # loop's run time is taken from op1's mark (1+1 only) to op3's (after the loop returned).
    grew = grown("op1:evaluate", "op3:evaluate")
    burner = max(grew, key=lambda k: grew[k])
    burn_ns, op_ns = grew[burner], _cpu(by_name[BURN_OP])
    cpu_ms = {p["name"]: round(_cpu(p) / 1e6, 1) for p in engine["phases"]}
    print(
        f"{label}: burning thread {burn_ns / 1e6:.1f} ms over op1+op2; engine CPU per phase "
        f"(ms) {cpu_ms}"
    )
    if burn_ns < 150e6:
        before, after = (
            {pid for pid, _tid in phases.witness[marks.index(op)][1]}
            for op in ("op1:evaluate", "op3:evaluate")
        )
        if before - after:  # the witness cannot read an exited process
            raise LostWitness(
                f"the witness lost pid(s) {sorted(before - after)} of the group during "
                f"the burn: it cannot say which thread ran the loop ({cpu_ms})"
            )
    if burn_ns < 150e6:
        raise LateWitness(f"the loop hardly ran after op1's mark: no burn to attribute ({cpu_ms})")
    # the group's CPU in the burn op holds the loop (90%: the burner's op1 work, 1+1, is in
    # burn_ns too, and so is whatever the thread ran before the witness read at op3's mark, which
    # lags the mark on a loaded host: 0.93 was seen at load 5): a mark at op2 that came late
    # would leave that part of the loop in op1 and fail this. The neighbours hold less than the burn op (what they do hold is Chrome's own
    # work, e.g. the fresh page settling after op0; on a loaded host up to ~150 ms was seen)
    assert op_ns >= 0.9 * burn_ns, cpu_ms
    for neighbour in ("op1:evaluate", "op3:evaluate"):
        if _cpu(by_name[neighbour]) < op_ns:
            continue
        # More CPU in a neighbour than in the burn op: the loop's thread decides whose it was.
        loop_there = grown(neighbour, marks[marks.index(neighbour) + 1]).get(burner, 0)
        assert loop_there < 0.5 * burn_ns, (neighbour, loop_there, burn_ns, cpu_ms)
        raise BusyNeighbour(f"{neighbour} held Chrome's own work, not the loop ({cpu_ms})")
    total, between = _cpu(engine["total"]), _cpu(engine["between_marks"])
    assert sum(_cpu(p) for p in engine["phases"]) + between == total
    return burn_ns


def _check_read_by_adapter(phases: Witnessed, burn_ns: int, label: str) -> None:
    """The adapter read the engine's group at each op itself: the engine's phases are the same
    ops, in order, inside the adapter's run; the harness's clock keeps that run as one phase
    (its own CPU is not readable from the adapter); the burn op holds the loop."""
    record = phases.to_json()
    assert violations("metewand_browser_attempt_phases-1", record) == []
    assert record["granularity"] == "driver_ops"
    assert record["driver_marks"] == {"received": 6, "refused": 0, "read_by": "adapter"}
    engine = record["engine"]
    assert [p["name"] for p in engine["phases"]] == MARKED
    harness = [p["name"] for p in record["harness"]["phases"]]
    assert harness == ["target_snapshot", "adapter_run", "grade"]
    starts = [p["start_offset_ns"] for p in engine["phases"]]
    assert starts == sorted(starts) and engine["late_marks"] == 0
    by_name = {p["name"]: p for p in engine["phases"]}
    cpu_ms = {p["name"]: round(_cpu(p) / 1e6, 1) for p in engine["phases"]}
    print(f"{label}: engine CPU per phase (ms) {cpu_ms}; the witnessed loop {burn_ns / 1e6:.1f}")
    op_ns = _cpu(by_name[BURN_OP])
    # the same loop as the witnessed attempts': its CPU moves a little between runs, never by
    # a quarter; a mark taken late would leave part of it in op1, early part of it in op3
    assert op_ns >= 0.75 * burn_ns, cpu_ms
    for neighbour in ("op1:evaluate", "op3:evaluate"):
        if _cpu(by_name[neighbour]) >= op_ns:
            raise BusyNeighbour(f"{neighbour} held Chrome's own work, not the loop ({cpu_ms})")
    total, between = _cpu(engine["total"]), _cpu(engine["between_marks"])
    assert sum(_cpu(p) for p in engine["phases"]) + between == total


def test_an_attempt_without_marks_gets_no_channel_key_and_an_unmarking_adapter_one_phase(
    chrome_in_group: Any, tmp_path: Path
) -> None:
    """No phases: the payload carries no mark descriptor, so the adapter writes nothing. A
    configured adapter that ignores the key keeps today's one adapter_run phase."""
    process, group = chrome_in_group
    root = _corpus(tmp_path / "corpus")
    key = "cdp_use"
    found = _found(key)
    task = next(t for t in load_corpus(root).tasks if t.task_id == f"burn_{key}")
    # an adapter of the contract only: it echoes the checks the task declares as passed and
    # says which payload keys it was given (in its answer)
    script = tmp_path / "plain_adapter.py"
    script.write_text(
        "import json, sys\n"
        "p = json.loads(sys.stdin.read())\n"
        "rows = [{'name': 'driver_connect', 'status': 'pass', 'evidence': 'plain'}]\n"
        "rows += [{'name': c.get('label') or c['kind'], 'status': 'pass', 'evidence': 'x'}\n"
        "         for c in p['checks']]\n"
        "print(json.dumps({'ok': True, 'answer': sorted(p), 'observations': {'checks': rows}}))\n"
    )
    from metewand.suites.browser.adapters import AdapterCommand

    plain = FoundDriver(found.path, AdapterCommand((sys.executable, str(script))), "1", "test")

    async def attempt(phases: AttemptPhases | None) -> Any:
        endpoint = await engine_endpoint("chrome", process)

        async def runner_for(_found: FoundDriver) -> tuple[AdapterRunner, str]:
            return open_adapter(plain.command, "per_attempt"), "per_attempt"

        ids = AdapterAttempt("op-marks", 1, "s0", "http://127.0.0.1:9")
        return await run_attempt(
            task, endpoint, tmp_path / "out", ids, runner_for=runner_for, phases=phases
        )

    outcome = asyncio.run(attempt(None))
    assert outcome.status == "pass", outcome.reason
    assert "metewand_mark_fd" not in outcome.answer
    phases = AttemptPhases(group, "adapter_run", concurrent=False)
    outcome = asyncio.run(attempt(phases))
    assert "metewand_mark_fd" in outcome.answer  # offered; this adapter does not use it
    assert "metewand_mark_reads" in outcome.answer
    record = phases.to_json()
    assert record["granularity"] == "adapter_run"
    assert record["driver_marks"] == {"received": 0, "refused": 0, "read_by": "adapter"}
    names = [p["name"] for p in record["engine"]["phases"]]
    # an adapter that does not say where its pages were is cleared after it (state_clear)
    assert names == ["target_snapshot", "adapter_run", "state_clear", "grade"]


def test_the_channel_marks_plain_names_in_order_and_refuses_the_rest() -> None:
    """A real writer process on the real pipe: plain names and empty lines (end of a phase) are
    marked in order; a line with other characters, or past the per-attempt limit, is counted as
    refused and never marked; a line left unfinished is not a mark."""
    from metewand.suites.browser import op_marks

    lines = ["driver_connect", "op0:new_page", "op1:bad name", "", "op2:x" * 30, "op3:goto"]
    script = (
        "import os, sys\n"
        "fd = int(sys.argv[1])\n"
        f"for line in {lines!r}:\n"
        "    os.write(fd, line.encode() + b'\\n')\n"
        "os.write(fd, b'op4:unfinished')\n"
    )

    async def attempt() -> tuple[list[str | None], dict[str, int]]:
        channel = op_marks.MarkChannel()
        seen: list[str | None] = []
        listener = channel.listen(seen.append)
        writer = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, str(channel.child_fd), pass_fds=(channel.child_fd,)
        )
        channel.started()
        assert await writer.wait() == 0
        counts = listener.finish()
        channel.close()
        return seen, counts

    seen, counts = asyncio.run(attempt())
    assert seen == ["driver_connect", "op0:new_page", None, "op3:goto"]
    assert counts == {"received": 4, "refused": 2, "read_by": "harness"}  # a space; 150 chars


def test_marks_are_read_while_the_writer_runs_not_only_at_the_end() -> None:
    """The loop marks a line while the adapter is still running (the counters are read at the
    op boundary), not when the attempt ends: each mark here lands before the writer's next
    line, which it writes only once it sees the mark's reply on a second pipe."""
    from metewand.suites.browser import op_marks

    script = (
        "import os, sys\n"
        "fd, ack = int(sys.argv[1]), int(sys.argv[2])\n"
        "for i in range(5):\n"
        "    os.write(fd, f'op{i}:evaluate\\n'.encode())\n"
        "    assert os.read(ack, 1) == b'k'\n"
    )

    async def attempt() -> list[str | None]:
        channel = op_marks.MarkChannel()
        ack_r, ack_w = os.pipe()
        seen: list[str | None] = []

        def mark(name: str | None) -> None:
            seen.append(name)
            os.write(ack_w, b"k")  # the writer goes on only once this mark was taken

        listener = channel.listen(mark)
        writer = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            str(channel.child_fd),
            str(ack_r),
            pass_fds=(channel.child_fd, ack_r),
        )
        channel.started()
        os.close(ack_r)
        status = await asyncio.wait_for(writer.wait(), 30)
        listener.finish()
        channel.close()
        os.close(ack_w)
        assert status == 0
        return seen

    assert asyncio.run(attempt()) == [f"op{i}:evaluate" for i in range(5)]


def test_a_runaway_adapter_is_cut_at_the_mark_limit() -> None:
    from metewand.suites.browser import op_marks

    extra = 7
    payload = b"".join(f"op{i}:evaluate\n".encode() for i in range(op_marks.MAX_MARKS + extra))

    async def attempt() -> tuple[list[str | None], dict[str, int]]:
        channel = op_marks.MarkChannel()
        seen: list[str | None] = []
        listener = channel.listen(seen.append)
        writer = os.fork()
        if writer == 0:  # a child writing far past the limit (the pipe drains as it goes)
            os.set_blocking(channel.child_fd, True)
            os.write(channel.child_fd, payload)
            os._exit(0)
        channel.started()
        while not channel.at_eof:  # the loop reads as the child writes (a full pipe blocks it)
            await asyncio.sleep(0.01)
        os.waitpid(writer, 0)
        counts = listener.finish()
        channel.close()
        return seen, counts

    seen, counts = asyncio.run(attempt())
    assert counts == {"received": op_marks.MAX_MARKS, "refused": extra, "read_by": "harness"}
    assert seen[-1] == f"op{op_marks.MAX_MARKS - 1}:evaluate"


def test_the_listener_rests_once_the_adapter_has_gone() -> None:
    """After the last writer exits, the pipe's read end reads as ready (end of file) for ever: the
    listener must stop watching it instead of spinning until its attempt ends."""
    from metewand.suites.browser import op_marks

    async def attempt() -> None:
        channel = op_marks.MarkChannel()
        reads = []
        real_lines = channel.lines

        def counted() -> list[bytes]:
            reads.append(1)
            return real_lines()

        channel.lines = counted  # type: ignore[method-assign]
        seen: list[str | None] = []
        listener = channel.listen(seen.append)
        writer = os.fork()
        if writer == 0:  # a real adapter's last words, then its exit
            os.write(channel.child_fd, b"driver_close\n")
            os._exit(0)
        channel.started()
        os.waitpid(writer, 0)
        for _ in range(300):
            if channel.at_eof:
                break
            await asyncio.sleep(0.01)
        settled = len(reads)
        await asyncio.sleep(0.3)  # a spinning listener would read thousands of times meanwhile
        assert len(reads) == settled <= 3
        assert listener.finish() == {"received": 1, "refused": 0, "read_by": "harness"}
        assert seen == ["driver_close"]
        channel.close()

    asyncio.run(attempt())


def test_a_short_read_empties_the_pipe_without_a_second_read(monkeypatch: Any) -> None:
    """A read that returns less than it asked for took all the pipe held: the listener does not
    read again to hear that it is empty (a woken loop paid ~20 µs per mark to raise and catch
    BlockingIOError). A read of nothing still says the writer is gone."""
    from metewand.suites.browser import op_marks

    channel = op_marks.MarkChannel()
    reads: list[int] = []
    real_read = os.read

    def counted(fd: int, n: int) -> bytes:
        if fd == channel.read_fd:
            reads.append(fd)
        return real_read(fd, n)

    monkeypatch.setattr(op_marks.os, "read", counted)
    os.write(channel.child_fd, b"driver_connect\nop0:goto\nop1:cli")
    assert channel.lines() == [b"driver_connect", b"op0:goto"] and len(reads) == 1
    os.write(channel.child_fd, b"ck\n")
    assert channel.lines() == [b"op1:click"] and len(reads) == 2
    assert not channel.at_eof
    channel.started()  # the write end's last holder closes it
    assert channel.lines() == [] and channel.at_eof
    channel.close()
