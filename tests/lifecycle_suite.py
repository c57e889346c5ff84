"""A small real suite for the executor and run-object tests: each attempt runs a real process.

An attempt's row records the pid of the process that ran it and its slot; ``sleep_s`` sets how
long that process lives; an attempt whose key is in ``fail_keys`` raises (a harness bug).
``interrupt`` kills the live processes, as the real suites do. Also a script: ``python
lifecycle_suite.py OUT RUN_ID UNITS ATTEMPTS SLEEP_S JOBS [--resume]`` runs such a suite through
``runtime.run.start`` (``ProcessStarter``) and exits with its outcome's code (130 on an
interrupt), as both CLIs do.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from metewand.runtime.run import ExecutorChoice, Prepared, RunRequest, start
from metewand.runtime.store import RunStore, RunView, StoreError
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


class ProcessStarter:
    """The toy suite's part of ``runtime.run.start`` (a third ``RunStarter``: the front half,
    the phase-mark rule and the interrupt contract are the runtime's, not a suite's)."""

    name = "process-test"

    def __init__(
        self,
        units: int,
        attempts: int,
        sleep_s: float = 0.0,
        jobs: int = 1,
        phase_marks: bool = True,
        fail_keys: frozenset[str] = frozenset(),
    ) -> None:
        self.shape = (units, attempts, sleep_s)
        self.jobs = jobs
        self.phase_marks = phase_marks
        self.fail_keys = fail_keys
        self.suite: ProcessSuite | None = None

    def check_resume(self, view: RunView) -> None:
        suite = view.manifest["data"].get("suite")
        if suite != self.name:
            raise StoreError(f"{view.run_dir} is not a {self.name} run (suite {suite!r})")

    def new_run(
        self, run_id: str, facts: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        return {"suite": self.name, "phase_marks": self.phase_marks}, None

    def on_open(self, store: RunStore) -> None:
        pass

    def prepare(self, store: RunStore, executor: ExecutorChoice) -> Prepared:
        units, attempts, sleep_s = self.shape
        self.suite = ProcessSuite(units, attempts, sleep_s, self.fail_keys, store)
        todo = self.suite.units()
        print(f"todo {sum(len(u.keys) for u in todo)}", flush=True)
        return Prepared(self.suite, todo, self.jobs, dict)


def main(argv: list[str]) -> int:
    out, run_id, units, attempts, sleep_s, jobs = argv[:6]
    resume = Path(out) / run_id if "--resume" in argv else None
    starter = ProcessStarter(int(units), int(attempts), float(sleep_s), int(jobs))
    outcome = start(starter, RunRequest(Path(out), run_id, resume))
    return outcome.report(lambda text: print(text, file=sys.stderr))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
