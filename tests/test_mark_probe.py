"""measure.mark_probe on real groups: kept-open descriptors read fresh values, agree with the
plain reader, restart the high-water per window without losing the group's lifetime peak, and a
group removed under the probe gives unavailable figures, never an exception."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from metewand.measure.accounting import AccountingUnavailable, TreeAccounting, open_accounting
from metewand.measure.mark_probe import CgroupProbe, KeptProbes, ProcProbe, _decode_cpu, probe_of
from metewand.measure.phases import counters_of
from metewand.suites.browser.phase_marks import AttemptPhases

MiB = 1 << 20
# burns CPU until stdin says otherwise; "fill N" holds N MiB (touched) until "free"
CHILD = """
import sys, threading, time
held = []
def burn():
    while True:
        pass
threading.Thread(target=burn, daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:
    word, *rest = line.split()
    if word == "fill":
        held.append(b"\\x01" * (int(rest[0]) << 20))
    elif word == "free":
        held.clear()
    print("done", flush=True)
"""


@pytest.fixture(params=["cgroup2", "cgroup1"])
def group(request: pytest.FixtureRequest) -> Iterator[tuple[TreeAccounting, subprocess.Popen[str]]]:
    try:
        accounting = open_accounting(request.param, label="mw-probe-test")
    except AccountingUnavailable as exc:
        pytest.skip(f"{request.param}: {exc.reason}")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=accounting.preexec_join(),
    )
    accounting.attach(child.pid)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    try:
        yield accounting, child
    finally:
        accounting.close()  # kills the child, removes the groups
        child.wait()


def _tell(child: subprocess.Popen[str], line: str) -> None:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(line + "\n")
    child.stdin.flush()
    assert child.stdout.readline() == "done\n"


def test_snapshots_are_fresh_and_agree_with_the_plain_reader(
    group: tuple[TreeAccounting, subprocess.Popen[str]],
) -> None:
    accounting, child = group
    probe = probe_of(accounting)
    assert isinstance(probe, CgroupProbe)
    read = counters_of(accounting)
    try:
        first = probe.snap()
        start = probe.decode(first).cpu.total.value or 0
        deadline = time.monotonic() + 30
        # the plain reader (open, read, close) sees the busy child pass 20 ms more CPU...
        while (read().cpu.total.value or 0) < start + 20_000_000:
            assert time.monotonic() < deadline, "the child burned no CPU"
            time.sleep(0.01)
        second = probe.snap()
        plain = read()
    finally:
        probe.close()
    a, b = probe.decode(first), probe.decode(second)
    burned = (b.cpu.total.value or 0) - (a.cpu.total.value or 0)
    assert burned >= 20_000_000  # ...and so does a pread of the kept-open descriptor: not stale
    assert b.cpu.user.value is not None and b.cpu.system.value is not None
    # the plain reader, read just after, is at or beyond the snapshot, and close to it
    assert plain.cpu.total.value is not None and b.cpu.total.value is not None
    assert 0 <= plain.cpu.total.value - b.cpu.total.value < 200_000_000
    # user and system agree with the plain reader's (cgroup1: tick-based, like its usage_user)
    assert plain.cpu.user.value is not None and plain.cpu.system.value is not None
    assert 0 <= plain.cpu.user.value - b.cpu.user.value < 200_000_000
    assert 0 <= plain.cpu.system.value - b.cpu.system.value < 200_000_000
    assert b.process_count.value == plain.process_count.value == 1
    assert b.memory_current.value is not None and plain.memory_current.value is not None
    assert abs(b.memory_current.value - plain.memory_current.value) < 8 * MiB


def test_each_window_has_its_own_peak_and_the_group_keeps_the_highest(
    group: tuple[TreeAccounting, subprocess.Popen[str]],
) -> None:
    accounting, child = group
    probe = probe_of(accounting)
    try:
        if probe.peak_method.startswith("unavailable"):
            pytest.skip(probe.peak_method)
        probe.snap()  # the first window starts here
        _tell(child, "fill 64")
        _tell(child, "free")
        big = probe.decode(probe.snap()).memory_peak
        _tell(child, "fill 16")
        _tell(child, "free")
        small = probe.decode(probe.snap()).memory_peak
    finally:
        probe.close()
    assert big.value is not None and small.value is not None
    assert big.value >= 64 * MiB
    assert small.value <= big.value - 40 * MiB  # the restart at the mark forgot the 64 MiB
    lifetime = accounting.memory().peak
    assert lifetime.value is not None and lifetime.value >= big.value


def test_a_group_removed_under_the_probe_gives_unavailable_figures(
    group: tuple[TreeAccounting, subprocess.Popen[str]],
) -> None:
    accounting, child = group
    probe = probe_of(accounting)
    try:
        accounting.close()  # kills the child and removes the groups; the descriptors stay open
        counters = probe.decode(probe.snap())
    finally:
        probe.close()
    assert counters.cpu.total.value is None
    assert counters.cpu.total.reason is not None
    assert counters.cpu.total.reason.value == "accounting_unavailable"
    assert counters.monotonic_ns > 0


def test_the_proc_fallback_walks_once_at_the_mark_and_has_no_window_peak() -> None:
    accounting = open_accounting("proc")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    accounting.attach(child.pid)
    try:
        probe = probe_of(accounting)
        assert isinstance(probe, ProcProbe)
        counters = probe.decode(probe.snap())
        plain = counters_of(accounting)()
        assert counters.cpu.total.status == "partial"
        assert counters.process_count == plain.process_count  # partial process_only, 1
        assert counters.process_count.value == 1
        assert counters.memory_peak.status == "unavailable"
        assert probe.peak_method.startswith("unavailable")
    finally:
        child.kill()
        child.wait()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _attempt(
    accounting: TreeAccounting, kept: KeptProbes, child: subprocess.Popen[str], mib: int
) -> dict[str, object]:
    """One attempt's marks: a phase that holds ``mib`` MiB at its end, then its record."""
    phases = AttemptPhases(accounting, "steps", concurrent=False, probes=kept)
    phases.begin()
    phases.mark("fill")
    _tell(child, f"fill {mib}")
    phases.mark("free")
    _tell(child, "free")
    phases.finish()
    record = phases.to_json()["engine"]
    assert isinstance(record, dict)
    return {p["name"]: p for p in record["phases"]}


def test_kept_probes_open_a_groups_files_once_for_every_attempt_and_close_with_their_owner(
    group: tuple[TreeAccounting, subprocess.Popen[str]],
) -> None:
    accounting, child = group
    kept = KeptProbes()
    before = _open_fds()
    try:
        first = _attempt(accounting, kept, child, 64)
        opened = _open_fds()
        second = _attempt(accounting, kept, child, 8)
        # the engine group's files and the harness's statm stay open: not closed by the first
        # attempt's record, not opened again by the second
        assert opened > before
        assert _open_fds() == opened
        assert kept.probe(accounting) is kept.probe(accounting)
    finally:
        kept.close()
    assert _open_fds() == before
    for phases in (first, second):
        assert phases["fill"]["cpu_time_ns"]["status"] == "complete"  # the child burns throughout
        assert phases["fill"]["cpu_time_ns"]["value"] > 0
    # the kept descriptors read each attempt's own memory: the rise of its own fill...
    assert first["fill"]["memory_rise_bytes"]["value"] >= 60 * MiB
    assert 4 * MiB <= second["fill"]["memory_rise_bytes"]["value"] <= 30 * MiB
    if first["fill"]["memory_peak_bytes"]["status"] == "complete":
        # ...and the high-water restarted at each mark, not carried over from the attempt before
        assert first["fill"]["memory_peak_bytes"]["value"] >= 64 * MiB
        peak = second["fill"]["memory_peak_bytes"]["value"]
        assert peak <= first["fill"]["memory_peak_bytes"]["value"] - 40 * MiB


def test_cpu_stat_is_read_by_name_when_its_first_lines_are_not_the_usual_three() -> None:
    usual = b"usage_usec 30\nuser_usec 20\nsystem_usec 10\nnr_periods 0\n"
    moved = b"nr_periods 0\nsystem_usec 10\nuser_usec 20\nusage_usec 30\n"
    for raw in (usual, moved):
        cpu = _decode_cpu(raw, "cgroup2:cpu.stat")
        assert (cpu.total.value, cpu.user.value, cpu.system.value) == (30_000, 20_000, 10_000)
