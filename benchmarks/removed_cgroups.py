"""Whether memory cgroups removed but not freed ("dying") slow a harness: made on demand.

A removed cgroup v1 memory group lives on while page cache is still charged to it. A host that
makes and removes groups all day (a test suite, per-attempt adapter groups) piles them up: this
project's host held ~9,300 after a day of CI runs, at a time when both harnesses ran slower than
in the morning, ours more. An earlier note took them as a lead. This script tests it: it makes
``--groups`` of them (each: a group, a child in it that writes a 4 KiB file, the group removed;
the file's cached page keeps the group), times what a harness does with memory groups, and
times it again after unlinking the files (which frees the groups):

- making a memory group and removing it again (``mkdir`` + ``rmdir``, as each per-attempt
  adapter's accounting group is);
- reading a live group's ``memory.usage_in_bytes`` and ``memory.max_usage_in_bytes`` (a phase
  mark's reads);
- optionally (``--run-cmd``) a whole command, e.g. a ``metewand browser run``: its wall and the
  CPU of its process tree (``os.wait4``).

Each timing is the median of ``--reps`` calls, in µs of the calling thread's CPU and of wall.
The count is /proc/cgroups' ``memory`` figure less the groups visible under the hierarchy's
mount (whole-hierarchy mounts only). On 2026-12-07, 9,000 such groups changed none of the
timings (docs/performance.md): the lead was wrong, at least for groups pinned this way.

    .venv/bin/python benchmarks/removed_cgroups.py [--groups 5000] [--reps 300] [--run-cmd "..."]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from metewand.measure.accounting import open_accounting
from metewand.measure.cgroups import detect_layout

WRITE = "import sys; open(sys.argv[1], 'wb').write(b'\\x01' * 4096)"


def dying(mountpoint: str = "/sys/fs/cgroup/memory") -> int:
    """Memory groups the kernel counts (/proc/cgroups) less those visible under the mount."""
    with open("/proc/cgroups") as handle:
        counted = next(int(f[2]) for f in map(str.split, handle) if f and f[0] == "memory")
    return counted - sum(1 for _ in os.walk(mountpoint))


def pin_groups(count: int, where: Path) -> list[Path]:
    """``count`` removed groups, each kept by the page of one file written from inside it."""
    files = []
    for i in range(count):
        accounting = open_accounting("cgroup1", label="mw-removed-bench")
        path = where / f"pin{i}"
        try:
            child = subprocess.Popen(
                [sys.executable, "-c", WRITE, str(path)], preexec_fn=accounting.preexec_join()
            )
            child.wait()
        finally:
            accounting.close()
        files.append(path)
    return files


def timed(op: Callable[[], object], reps: int) -> tuple[float, float]:
    """(median thread CPU µs, median wall µs) of ``op`` over ``reps`` calls."""
    cpu, wall = [], []
    for _ in range(reps):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        op()
        cpu.append(time.thread_time_ns() - c0)
        wall.append(time.perf_counter_ns() - w0)
    return statistics.median(cpu) / 1e3, statistics.median(wall) / 1e3


def timings(parent: str, reps: int, run_cmd: str | None) -> dict[str, tuple[float, float]]:
    probe = os.path.join(parent, f"mw-removed-probe-{os.getpid()}")
    os.mkdir(probe)
    live = os.path.join(parent, f"mw-removed-live-{os.getpid()}")
    os.mkdir(live)
    usage = os.open(os.path.join(live, "memory.usage_in_bytes"), os.O_RDONLY)
    peak = os.open(os.path.join(live, "memory.max_usage_in_bytes"), os.O_RDONLY)
    os.rmdir(probe)
    try:
        out = {
            "mkdir + rmdir": timed(lambda: _make_and_remove(probe), reps),
            "read usage + max_usage": timed(
                lambda: (os.pread(usage, 64, 0), os.pread(peak, 64, 0)), reps * 10
            ),
        }
    finally:
        os.close(usage)
        os.close(peak)
        os.rmdir(live)
    if run_cmd:
        out["the command (children's CPU ms, wall ms)"] = run(run_cmd)
    return out


def _make_and_remove(group: str) -> None:
    os.mkdir(group)
    os.rmdir(group)


def run(cmd: str) -> tuple[float, float]:
    start = time.perf_counter()
    child = subprocess.Popen(shlex.split(cmd), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"--run-cmd exited {status}")
    return (usage.ru_utime + usage.ru_stime) * 1e3, (time.perf_counter() - start) * 1e3


def _mount_root(mountpoint: str) -> str | None:
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) > 4 and fields[4] == mountpoint:
                return fields[3]
    return None


def show(label: str, figures: dict[str, tuple[float, float]]) -> None:
    print(f"{label} (memory groups removed but not freed: {dying()})")
    for name, (cpu, wall) in figures.items():
        print(f"  {name:42s} CPU {cpu:10.1f}  wall {wall:10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--run-cmd", help="a command to time in both states")
    args = parser.parse_args()
    layout = detect_layout()
    memory = layout.v1.get("memory")
    if memory is None or not memory.writable:
        raise SystemExit("no writable cgroup v1 memory hierarchy here")
    if _mount_root(memory.mountpoint) != "/":
        raise SystemExit(
            "the memory mount shows part of its hierarchy: its groups cannot be counted"
        )
    parent = memory.own_dir or memory.mountpoint
    print(f"memory groups made under {parent}; µs unless said otherwise")
    with tempfile.TemporaryDirectory(prefix="mw-removed-") as where:
        show("before", timings(parent, args.reps, args.run_cmd))
        started = time.perf_counter()
        files = pin_groups(args.groups, Path(where))
        print(f"{args.groups} groups made and removed in {time.perf_counter() - started:.0f} s")
        show("pinned", timings(parent, args.reps, args.run_cmd))
        for path in files:
            path.unlink()
        deadline = time.monotonic() + 60
        while dying() > args.groups // 10 and time.monotonic() < deadline:
            time.sleep(0.5)
        show("freed", timings(parent, args.reps, args.run_cmd))


if __name__ == "__main__":
    main()
