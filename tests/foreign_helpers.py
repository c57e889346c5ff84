"""Helpers for the foreign-CPU tests: a real niced CPU burner outside the benchmark, and a
watcher that learns which processes belong to a run by an environment marker (a fact the
telemetry never reads, so the check does not share its method)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.measure import procfs

BURNER_COMM = "mw-burner"
# ~0.5 core: 50 ms busy, 50 ms asleep, niced (argv[2]) so it yields to the work on the host.
BURNER = f"""
import os, sys, time
with open("/proc/self/comm", "w") as comm:
    comm.write("{BURNER_COMM}")
os.nice(int(sys.argv[2]))
end = time.monotonic() + float(sys.argv[1])
print("ready", flush=True)
while time.monotonic() < end:
    busy_until = time.monotonic() + 0.05
    while time.monotonic() < busy_until:
        pass
    time.sleep(0.05)
"""
MARKER = "METEWAND_TEST_FOREIGN_MARKER"


def orphan_burner(cpu_s: float, wait_for_line: bool = False) -> str:
    """A script for a session leader that forks a burner of ``cpu_s`` CPU seconds (3 s of wall
    at most) and exits at once, so the burner is orphaned at birth; with ``wait_for_line`` the
    leader first waits for a line on its stdin."""
    wait = "sys.stdin.readline()\n" if wait_for_line else ""
    return (
        f"import os, sys, time\n{wait}if os.fork() == 0:\n"
        "    end = time.monotonic() + 3\n"
        f"    while time.process_time() < {cpu_s} and time.monotonic() < end:\n"
        "        pass\n    os._exit(0)\nos._exit(0)\n"
    )


@contextmanager
def burner(seconds: float = 120, nice: int = 10) -> Iterator[subprocess.Popen[bytes]]:
    """A CPU burner started by the test process, never by the run under test."""
    proc = subprocess.Popen(
        [sys.executable, "-c", BURNER, str(seconds), str(nice)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


class RunProcesses:
    """Every process that carries ``MARKER=<token>`` in its environment (engines and their
    double-forked helpers) or descends from ``root`` (workers started with a clean
    environment), polled in a thread."""

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex
        self.root: int | None = None
        self.pids: set[int] = set()
        self._checked: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, MARKER: self.token}

    def __enter__(self) -> RunProcesses:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        needle = f"{MARKER}={self.token}".encode()
        while not self._stop.wait(0.05):
            if self.root is not None:
                self.pids.update(procfs.descendants(self.root))
            for pid, st in procfs.read_all_stats().items():
                key = (pid, st.starttime_ticks)
                if key in self._checked:
                    continue
                self._checked.add(key)
                try:
                    if needle in procfs.read_environ(pid):
                        self.pids.add(pid)
                except (procfs.ProcessGone, PermissionError):
                    continue


def samples(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "host_telemetry.jsonl").read_bytes().splitlines()
    return [canonical.loads(line) for line in lines if line.strip()]


def host_summary(run_dir: Path) -> dict[str, Any]:
    return dict(canonical.loads((run_dir / "host_summary.json").read_bytes()))


def named_pids(rows: list[dict[str, Any]]) -> dict[int, str]:
    """pid -> comm of every process any sample named as a top foreign consumer."""
    return {
        entry["pid"]: entry["comm"]
        for s in rows
        if s.get("foreign_cpu")
        for entry in s["foreign_cpu"]["top_foreign"]
    }


def assert_own_never_foreign(rows: list[dict[str, Any]], own: set[int]) -> None:
    """No process of the run is ever named foreign, and the run's CPU is counted as its own."""
    figured = [s["foreign_cpu"] for s in rows if s.get("foreign_cpu")]
    assert len(figured) >= 3, "too few samples carry foreign CPU"
    assert own, "the watcher saw none of the run's processes"
    named = named_pids(rows)
    assert not set(named) & own, {pid: named[pid] for pid in set(named) & own}
    assert sum(f["bench_cpu_cores"] > 0 for f in figured) >= len(figured) // 2
