"""Driver-op marks read by the adapter itself (``op_marks``, ``read_by: adapter``): the adapter
reads the engine group's files at its own op boundary and writes their bytes down its line; the
harness reads the pipe once, after the attempt. Real cgroups, a real writer process running
the Python adapters' own ``OpMarks`` (drivers/python/adapter_common.py), a real pipe.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from metewand.measure.accounting import TreeAccounting, open_accounting
from metewand.measure.mark_probe import CgroupProbe, KeptProbes
from metewand.runtime.schemas import violations
from metewand.suites.browser import op_marks
from metewand.suites.browser.phase_marks import AttemptPhases

ADAPTERS = Path(__file__).resolve().parents[1] / "drivers" / "python"

# every writer below: the Python adapters' own OpMarks, given the payload on its first line
PREAMBLE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from adapter_common import OpMarks
payload = json.loads(sys.stdin.readline())
marks = OpMarks(payload)
"""

# the adapter's side: rest, burn ~0.25 s of CPU, rest, each an op marked with its readings
BURNING_ADAPTER = (
    PREAMBLE
    + """
import time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
marks("op0:rest"); time.sleep(0.15)
marks("op1:burn"); burn(0.25)
marks("op2:rest"); time.sleep(0.15)
marks("")
marks.close()
"""
)

# lines a foreign adapter might write: each after a good one, so only it is refused
CRAFTED_ADAPTER = (
    PREAMBLE
    + """
fd = payload["metewand_mark_fd"]
good = marks.reads.read()
stamp, *fields = good.split(b"\\t")
def line(name, readings):
    os.write(fd, name + b"\\t" + readings + b"\\n")
line(b"op0:good", good)
os.write(fd, b"op1:no_readings\\n")
line(b"op2:before_the_attempt", b"\\t".join([b"1", *fields]))
line(b"op3:one_file_short", b"\\t".join([stamp, *fields[1:]]))
line(b"op4:not_a_counters_file", b"\\t".join([stamp, b"nonsense|", *fields[1:]]))
line(b"op5:bad stamp", good)
line(b"op6:denied", b"\\t".join([marks.reads.read().split(b"\\t")[0], b"!EACCES", *fields[1:]]))
marks.close()
"""
)


def _group_or_skip(label: str) -> TreeAccounting:
    group = open_accounting(label=f"{label}-{os.getpid()}")
    if group.backend == "proc":
        group.close()
        pytest.skip("no cgroup backend here: the harness reads the marks itself (read_by harness)")
    return group


async def _attempt(script: str, group: TreeAccounting) -> AttemptPhases:
    """One attempt's marks from a real writer in ``group``, read by it."""
    channel = op_marks.MarkChannel()
    phases = AttemptPhases(group, "adapter_run", concurrent=False)
    phases.begin()
    payload, listener = channel.offer({}, phases.sink())
    writer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        str(ADAPTERS),
        stdin=asyncio.subprocess.PIPE,
        pass_fds=(channel.child_fd,),
    )
    channel.started()
    assert writer.stdin is not None
    group.attach(writer.pid)
    writer.stdin.write(json.dumps(payload).encode() + b"\n")
    await writer.stdin.drain()
    assert await asyncio.wait_for(writer.wait(), 30) == 0
    phases.took_driver_marks(listener.finish())
    phases.finish()
    channel.close()
    return phases


def _ms(form: dict[str, Any]) -> float:
    assert form["status"] == "complete", form
    return float(form["value"]) / 1e6


def test_the_adapters_readings_put_its_burn_in_its_op() -> None:
    group = _group_or_skip("mark-reads")
    try:
        record = asyncio.run(_attempt(BURNING_ADAPTER, group)).to_json()
    finally:
        group.close()
    assert violations("metewand_browser_attempt_phases-1", record) == []
    assert record["granularity"] == "driver_ops"
    assert record["driver_marks"] == {"received": 4, "refused": 0, "read_by": "adapter"}
    engine = {p["name"]: p for p in record["engine"]["phases"]}
    assert list(engine) == ["op0:rest", "op1:burn", "op2:rest"]
    cpu = {name: _ms(p["cpu_time_ns"]) for name, p in engine.items()}
    wall = {name: _ms(p["wall_time_ns"]) for name, p in engine.items()}
    print(f"engine CPU per op (ms) {cpu}, wall {wall}")
    # the burn's CPU is in its op, at the boundaries the adapter read (not when a loop woke)
    assert 240 <= cpu["op1:burn"] <= 400, cpu
    assert cpu["op0:rest"] < 30 and cpu["op2:rest"] < 30, cpu
    assert wall["op0:rest"] >= 150 and wall["op2:rest"] >= 150, wall
    assert engine["op1:burn"]["process_count_end"]["value"] == 1
    # the harness's clock took no mark from these lines: its CPU is its own
    assert record["harness"]["phases"] == []
    peak = engine["op1:burn"]["memory_peak_bytes"]
    assert peak["status"] in ("complete", "unavailable"), peak
    assert (peak["status"] == "complete") == record["engine"]["memory_peak_method"].startswith(
        "cgroup"
    )


def test_lines_whose_readings_are_not_as_asked_are_refused() -> None:
    group = _group_or_skip("mark-reads-refused")
    try:
        record = asyncio.run(_attempt(CRAFTED_ADAPTER, group)).to_json()
    finally:
        group.close()
    # refused: no readings, a moment before the attempt, a file short, not a counters file, a
    # name that is not plain; a failed read is a mark whose figures say why
    assert record["driver_marks"] == {"received": 2, "refused": 5, "read_by": "adapter"}
    phases = record["engine"]["phases"]
    assert [p["name"] for p in phases] == ["op0:good", "op6:denied"]
    assert phases[0]["cpu_time_ns"] == {"status": "unavailable", "reason": "permission_denied"}


def test_a_pipe_too_small_for_an_attempts_readings_leaves_the_reading_to_the_harness() -> None:
    group = _group_or_skip("mark-reads-small")

    async def offered() -> tuple[dict[str, Any], dict[str, Any]]:
        channel = op_marks.MarkChannel()
        assert channel.capacity >= op_marks.PIPE_BYTES  # this host allows 1 MiB pipes
        channel.capacity = 65536  # what a host with a low pipe-max-size gives
        phases = AttemptPhases(group, "adapter_run", concurrent=False)
        phases.begin()
        payload, listener = channel.offer({}, phases.sink())
        counts = listener.finish()
        phases.finish()
        channel.close()
        return payload, counts

    try:
        payload, counts = asyncio.run(offered())
    finally:
        group.close()
    assert op_marks.PAYLOAD_KEY in payload and op_marks.READS_KEY not in payload
    assert counts["read_by"] == "harness"


def test_the_plan_names_the_files_a_mark_reads_in_its_order() -> None:
    """The plan and ``snap()`` read the same files: a snapshot made from the plan's bytes, read
    here, decodes to the figures ``snap()``'s decode gives."""
    group = _group_or_skip("mark-reads-plan")
    try:
        kept = KeptProbes()
        phases = AttemptPhases(group, "adapter_run", concurrent=False, probes=kept)
        reads = phases.sink().reads
        assert reads is not None
        probe = kept.probe(group)  # the attempt's engine probe, which the run keeps
        assert isinstance(probe, CgroupProbe)
        raw: list[bytes | OSError] = []
        for entry in reads.plan:
            with open(entry["path"], "rb") as file:
                raw.append(file.read(entry["size"]))
        mine = probe.decode(probe.snapshot_of(1, raw))
        theirs = probe.decode(probe.snap())
        assert mine.cpu.total.value is not None and theirs.cpu.total.value is not None
        assert mine.cpu.total.value <= theirs.cpu.total.value
        assert mine.process_count == theirs.process_count
        with pytest.raises(ValueError):
            probe.snapshot_of(1, raw[1:])
        kept.close()
    finally:
        group.close()


# an adapter that writes one good line over and over until the pipe is full
FILLING_ADAPTER = (
    PREAMBLE
    + """
fd = payload["metewand_mark_fd"]
line = b"op0:again\\t" + marks.reads.read() + b"\\n"
try:
    while True:
        os.write(fd, line)
except BlockingIOError:
    pass
marks.close()
"""
)


def test_a_pipe_the_adapter_filled_is_said_to_be_full() -> None:
    """The harness reads the lines only after the result: lines written past the pipe's size
    are lost, and the record says so (``pipe_full``) instead of passing the rest off as all."""
    group = _group_or_skip("mark-reads-full")
    try:
        record = asyncio.run(_attempt(FILLING_ADAPTER, group)).to_json()
    finally:
        group.close()
    marks = record["driver_marks"]
    assert marks["pipe_full"] is True and marks["read_by"] == "adapter"
    assert marks["received"] == op_marks.MAX_MARKS and marks["refused"] > 0
