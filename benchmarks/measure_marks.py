"""What one phase mark costs (issue 16): reads per mark x the cost of a read, against a PSS scan.

A mark reads the cheap counters of a subject's group: CPU usage/user/system, memory current,
the member list and (where it can be restarted) the memory high-water since the previous mark —
never a PSS scan. For each accounting backend usable here, a real group holds a real process tree
(``--children`` sleeping Python processes, each holding ``--mib`` MiB), and this script times, in
the same run:

- one mark as phase clocks take it now (``measure.mark_probe``: ``snap()``, preads of kept-open
  descriptors) and its deferred ``decode()``; median wall and thread CPU per call over
  ``--marks`` calls, and the read system calls it makes (``syscr`` of /proc/self/io, counted);
- the plain reader (``measure.phases.counters_of``: open, read, close and parse every file at
  the mark), the baseline the probe replaces, and the ratio;
- each counter file on its own, open+read+close against a pread of a kept-open descriptor;
- one PSS scan of the same tree (``measure.pss.PssScanner``), the baseline a mark avoids;
- the marks' cost per attempt for ``--per-attempt`` marks.

    .venv/bin/python benchmarks/measure_marks.py [--marks 2000] [--children 4] [--mib 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from metewand.measure.accounting import (
    AccountingUnavailable,
    CgroupAccounting,
    TreeAccounting,
    open_accounting,
)
from metewand.measure.mark_probe import probe_of
from metewand.measure.phases import counters_of
from metewand.measure.pss import PssScanner

HOLDER = (
    "import sys, time; x = bytearray({mib} << 20); sys.stdout.write('ready\\n'); "
    "sys.stdout.flush(); time.sleep(600)"
)
TREE = (
    "import subprocess, sys, time\n"
    "kids = [subprocess.Popen([sys.executable, '-c', sys.argv[1]], stdout=subprocess.PIPE) "
    "for _ in range(int(sys.argv[2]))]\n"
    "[k.stdout.readline() for k in kids]\nprint('ready', flush=True)\ntime.sleep(600)"
)


def read_syscalls() -> int:
    with open("/proc/self/io") as handle:
        for line in handle:
            if line.startswith("syscr:"):
                return int(line.split()[1])
    raise RuntimeError("no syscr in /proc/self/io")


def timed(action: Callable[[], Any], count: int) -> tuple[float, float, float]:
    """Median wall µs, median thread-CPU µs, read syscalls per call (a warm-up call first)."""
    action()
    walls, cpus = [], []
    reads_before = read_syscalls()
    for _ in range(count):
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        action()
        cpus.append(time.thread_time_ns() - cpu)
        walls.append(time.perf_counter_ns() - wall)
    reads = (read_syscalls() - reads_before - 1) / count  # the last /proc/self/io read: 1
    return statistics.median(walls) / 1e3, statistics.median(cpus) / 1e3, reads


def start_tree(accounting: TreeAccounting, children: int, mib: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE, HOLDER.format(mib=mib), str(children)],
        preexec_fn=accounting.preexec_join(),
        stdout=subprocess.PIPE,
    )
    accounting.attach(proc.pid)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def one_backend(backend: str, args: argparse.Namespace, scanner: PssScanner) -> None:
    try:
        accounting = open_accounting(backend, label="bench-marks")
    except AccountingUnavailable as exc:
        print(f"{backend:8} unavailable here: {exc.reason}")
        return
    proc = None
    try:
        proc = start_tree(accounting, args.children, args.mib)
        probe = probe_of(accounting)
        try:
            mark_wall, mark_cpu, reads = timed(probe.snap, args.marks)
            raw = probe.snap()
            decode_wall, _, _ = timed(lambda: probe.decode(raw), args.marks)
        finally:
            probe.close()
        plain_wall, plain_cpu, plain_reads = timed(counters_of(accounting), args.marks)
        pss_wall, pss_cpu, _ = timed(lambda: scanner.scan(accounting.pids()), args.scans)
        members = len(accounting.pids())
        print(
            f"{backend:8} {members} processes | one mark (snap): {mark_wall:6.1f} µs wall, "
            f"{mark_cpu:6.1f} µs CPU, {reads:.1f} read syscalls; decode later {decode_wall:.1f}"
            f" µs | plain reader: {plain_wall:6.1f} µs wall, {plain_cpu:6.1f} µs CPU, "
            f"{plain_reads:.1f} read syscalls; plain / snap {plain_wall / mark_wall:4.1f}x | "
            f"one PSS scan: {pss_wall:8.1f} µs wall | scan / snap: {pss_wall / mark_wall:5.0f}x"
            f" | {args.per_attempt} marks per attempt: {args.per_attempt * mark_wall:.1f} µs"
        )
        print(f"{'':8} peak per phase: {probe.peak_method}")
        if isinstance(accounting, CgroupAccounting):
            per_file(accounting, args.marks)
    finally:
        accounting.kill()  # the /proc fallback's close() releases nothing: kill the tree first
        accounting.close()  # removes the groups
        if proc is not None:
            proc.wait()


def per_file(accounting: CgroupAccounting, count: int) -> None:
    """Each counter file: open+read+close (the plain reader) against pread of a kept-open fd."""
    names = {accounting.cpu_group.path: ["cgroup.procs"]}
    cpu_files = ["cpu.stat"] if accounting.cpu_group.version == 2 else list(V1_CPU)
    names[accounting.cpu_group.path] += cpu_files
    if accounting.memory_group is not None:
        memory = V2_MEMORY if accounting.memory_group.version == 2 else V1_MEMORY
        names.setdefault(accounting.memory_group.path, []).extend(memory)
    for directory, files in names.items():
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.exists(path):
                print(f"{'':8} {name:28} absent here")
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                whole, _, _ = timed(lambda p=path: _read_whole(p), count)  # type: ignore[misc]
                pread, _, _ = timed(lambda f=fd: os.pread(f, 4096, 0), count)  # type: ignore[misc]
            finally:
                os.close(fd)
            print(f"{'':8} {name:28} open+read+close {whole:5.1f} µs, pread {pread:4.1f} µs")


V1_CPU = ("cpuacct.usage", "cpuacct.stat", "cpuacct.usage_user", "cpuacct.usage_sys")
V1_MEMORY = ("memory.usage_in_bytes", "memory.max_usage_in_bytes")
V2_MEMORY = ("memory.current", "memory.peak")


def _read_whole(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--marks", type=int, default=2000)
    parser.add_argument("--scans", type=int, default=100)
    parser.add_argument("--children", type=int, default=4)
    parser.add_argument("--mib", type=int, default=20)
    parser.add_argument("--per-attempt", type=int, default=5)
    args = parser.parse_args()
    scanner = PssScanner()
    try:
        for backend in ("cgroup2", "cgroup1", "proc"):
            one_backend(backend, args, scanner)
    finally:
        scanner.close()


if __name__ == "__main__":
    main()
