"""A small real suite for the executor and run-object tests: each attempt runs a real process.

An attempt's row records the pid of the process that ran it and its slot; ``sleep_s`` sets how
long that process lives; an attempt whose key is in ``fail_keys`` raises (a harness bug).
``interrupt`` kills the live processes, as the real suites do. Also a script: ``python
lifecycle_suite.py OUT RUN_ID UNITS ATTEMPTS SLEEP_S JOBS [--resume]`` runs such a suite through
``runtime.run.Run`` and exits 130 on an interrupt, like the CLI.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from metewand.runtime.store import RunStore
from metewand.runtime.suite import Row, Unit, UnitEvents


class ProcessSlot:
    def __init__(self, suite: ProcessSuite, slot_id: str) -> None:
        self.suite = suite
        self.slot_id = slot_id
        self.closed = False

    def close(self) -> None:
        self.closed = True
        with self.suite.lock:
            self.suite.closed.append(self.slot_id)


class ProcessSuite:
    kind = "process-test"

    def __init__(
        self,
        units: int,
        attempts: int,
        sleep_s: float = 0.0,
        fail_keys: frozenset[str] = frozenset(),
        store: RunStore | None = None,
    ) -> None:
        self.planned = [
            Unit(tuple(f"u{u}/a{a}" for a in range(attempts)), {"unit": u}) for u in range(units)
        ]
        self.sleep_s = sleep_s
        self.fail_keys = fail_keys
        self.store = store
        self.lock = threading.Lock()
        self.opened: list[str] = []
        self.closed: list[str] = []
        self.live: dict[int, subprocess.Popen[bytes]] = {}
        self.active = 0
        self.peak = 0
        self.stopping = threading.Event()
        self.calls: list[str] = []  # prepare / teardown / finish, in order

    def units(self) -> list[Unit]:
        done = self.store.finished_keys() if self.store is not None else set()
        todo = [Unit(tuple(k for k in u.keys if k not in done), u.payload) for u in self.planned]
        return [u for u in todo if u.keys]

    def prepare(self) -> None:
        self.calls.append("prepare")

    def open_slot(self, slot_id: str) -> ProcessSlot:
        with self.lock:
            self.opened.append(slot_id)
        return ProcessSlot(self, slot_id)

    def run_unit(self, slot: Any, unit: Unit, events: UnitEvents | None = None) -> list[Row]:
        rows = []
        for key in unit.keys:
            if self.stopping.is_set():
                break
            if events is not None:
                events.attempt_started(key)
            row = self._attempt(slot, key)
            rows.append(row)
            if events is not None:
                events.attempt_finished(row)
        return rows

    def _attempt(self, slot: ProcessSlot, key: str) -> Row:
        if key in self.fail_keys:
            raise RuntimeError(f"injected fault in {key}")
        code = f"import time; time.sleep({self.sleep_s})"
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            process = subprocess.Popen([sys.executable, "-c", code])
            self.live[process.pid] = process
        try:
            returncode = process.wait()
        finally:
            with self.lock:
                self.active -= 1
                self.live.pop(process.pid, None)
        if self.stopping.is_set():  # cut short: not a result
            raise RuntimeError(f"{key} interrupted")
        status = "pass" if returncode == 0 else "fail"
        return {"key": key, "status": status, "pid": process.pid, "slot": slot.slot_id}

    def interrupt(self) -> None:
        self.stopping.set()
        with self.lock:
            live = list(self.live.values())
        for process in live:
            process.kill()

    def teardown(self) -> None:
        self.calls.append("teardown")

    def finish(self, completed: bool) -> None:
        self.calls.append(f"finish:{completed}")
        if self.store is not None:
            self.store.update_manifest({"finished": completed})


def main(argv: list[str]) -> int:
    from metewand.runtime.executor import LocalExecutor
    from metewand.runtime.run import Run, open_store

    out, run_id, units, attempts, sleep_s, jobs = argv[:6]
    resume = Path(out) / run_id if "--resume" in argv else None
    store = open_store(out, run_id, resume, {"suite": "process-test"})
    with store:
        suite = ProcessSuite(int(units), int(attempts), float(sleep_s), store=store)
        todo = suite.units()
        print(f"todo {sum(len(u.keys) for u in todo)}", flush=True)
        try:
            Run(store).execute(suite, LocalExecutor(int(jobs)), todo)
        except KeyboardInterrupt:
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
