"""A tiny real suite for the Dask executor's tests, and real Dask processes on loopback.

``pair-sleep``: unit i has two attempts (``u<i>/a`` and ``u<i>/b``, paired work), each a real
``sleep`` subprocess of the worker. The slot is a real long-lived ``cat`` process, opened once per
worker and reused; every row records the slot's pid, the pid and parent of its attempt's process,
so a test can see that units ran whole, on one worker, on a reused slot.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import metewand
from metewand.measure import procfs
from metewand.runtime import suite as suite_registry
from metewand.runtime.dask_executor import quiet_worker_env
from metewand.runtime.progress import ReporterFactory, null_reporter
from metewand.runtime.run import Run
from metewand.runtime.store import RunStore
from metewand.runtime.suite import Row, SuiteRef, Unit, build

KIND = "test-pair-sleep"
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV_BIN = Path(sys.executable).parent


class CatSlot:
    def __init__(self, slot_id: str) -> None:
        self.slot_id = slot_id
        self.process = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@dataclass
class PairSleepSuite:
    units_count: int
    sleep_s: float
    kind: str = KIND
    _current: subprocess.Popen[bytes] | None = None
    _stopping: bool = False
    # an interrupt between an attempt's start and its being recorded as current would miss it:
    # the attempt then slept its whole time (ci157, 60 s); the lock makes the two exclusive
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def prepare(self) -> None:
        pass

    def interrupt(self) -> None:
        """Kill the attempt in flight; the unit then returns no rows (it raises)."""
        with self._lock:
            self._stopping = True
            current = self._current
        if current is not None and current.poll() is None:
            current.kill()

    def teardown(self) -> None:
        pass

    def finish(self, completed: bool) -> None:
        pass

    def units(self) -> list[Unit]:
        return [
            Unit((f"u{i}/a", f"u{i}/b"), {"index": i, "sleep_s": self.sleep_s})
            for i in range(self.units_count)
        ]

    def open_slot(self, slot_id: str) -> CatSlot:
        return CatSlot(slot_id)

    def run_unit(self, slot: Any, unit: Unit, events: Any = None) -> list[Row]:
        assert slot.process.poll() is None, "the slot's process must still be alive"
        rows = []
        for key in unit.keys:
            started = time.time()
            with self._lock:
                if self._stopping:
                    raise RuntimeError(f"unit {unit.keys} interrupted")
                self._current = subprocess.Popen(["sleep", str(unit.payload["sleep_s"])])
            returncode = self._current.wait()
            if self._stopping:
                raise RuntimeError(f"unit {unit.keys} interrupted")
            rows.append(
                {
                    "key": key,
                    "status": "passed" if returncode == 0 else "failed",
                    "slot_pid": slot.process.pid,
                    "runner_pid": os.getpid(),
                    "started_unix": started,
                    "ended_unix": time.time(),
                }
            )
        return rows


def from_ref(ref: SuiteRef) -> PairSleepSuite:
    return PairSleepSuite(int(ref.config["units"]), float(ref.config["sleep_s"]))


def ref(units: int, sleep_s: float) -> SuiteRef:
    suite_registry.register(KIND, "dask_helpers:from_ref")
    return SuiteRef(KIND, {"units": units, "sleep_s": sleep_s})


def run_on_dask(
    store: RunStore,
    ref: SuiteRef,
    scheduler: str | None = None,
    local_workers: int | None = None,
    reporter: ReporterFactory = null_reporter,
) -> list[str]:
    """The suite's units the store lacks, on the path both suites' runners take for
    ``--executor dask`` (the run lifecycle over a DaskExecutor); this session's rows' keys, in
    the order the rows were written.

    As a real suite's ``units()`` does, a unit cut short by a client kill keeps only its keys
    without a row."""
    from metewand.runtime.dask_run import execute_on_dask

    suite = build(ref)
    done = store.finished_keys()
    units = [
        Unit(tuple(key for key in unit.keys if key not in done), unit.payload)
        for unit in suite.units()
        if not set(unit.keys) <= done
    ]
    return execute_on_dask(Run(store, None, reporter), suite, ref, units, scheduler, local_workers)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dask_env(extra_path: Path | None = None) -> dict[str, str]:
    """Worker environment: tests importable (the suite kind), quiet worker housekeeping."""
    paths = [str(extra_path)] if extra_path else []
    paths.append(str(HERE))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(quiet_worker_env())  # as docs/dask.md tells an operator
    return env


def dask_command(role: str, with_metewand: bool = True) -> list[str]:
    """``dask scheduler|worker`` of this environment; ``with_metewand=False``: the same Python
    and distributed with metewand's source directory off its path (what an operator's process
    from another environment, or one whose path misses the checkout, looks like)."""
    if with_metewand:
        return [str(VENV_BIN / "dask"), role]
    source = str(Path(metewand.__file__).resolve().parents[1])
    code = (
        f"import sys; sys.path = [p for p in sys.path if p != {source!r}]; "
        f"from distributed.cli.dask_{role} import main; main()"
    )
    return [sys.executable, "-c", code]


def start_scheduler(port: int, with_metewand: bool = True) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            *dask_command("scheduler", with_metewand),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-dashboard",
        ],
        env=dask_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_for_port(port)
    return process


def start_worker(
    port: int,
    name: str,
    extra_path: Path | None = None,
    host_resource: bool = True,
    with_metewand: bool = True,
) -> subprocess.Popen[bytes]:
    """A ``dask worker`` as the docs tell an operator to start one (without a nanny, so a
    killed worker stays dead and its pid is the worker itself)."""
    command = [
        *dask_command("worker", with_metewand),
        f"tcp://127.0.0.1:{port}",
        "--name",
        name,
        "--nworkers",
        "1",
        "--nthreads",
        "1",
        "--no-nanny",
        "--no-dashboard",
        "--host",
        "127.0.0.1",
    ]
    if host_resource:
        command += ["--resources", "metewand-host=1"]
    return subprocess.Popen(
        command,
        env=dask_env(extra_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def wait_for_workers(port: int, count: int, timeout_s: float = 30.0) -> None:
    wait_for_workers_at(f"tcp://127.0.0.1:{port}", count, timeout_s)


def wait_for_workers_at(address: str, count: int, timeout_s: float = 30.0) -> None:
    from distributed import Client

    with Client(address, timeout="10s") as client:
        client.wait_for_workers(count, timeout=timeout_s)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a process group this test started (TERM, then KILL)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    else:
        with contextlib.suppress(ProcessLookupError):  # what the dead leader left in its group
            os.killpg(process.pid, signal.SIGKILL)


def communicate_or_explain(process: subprocess.Popen[str], timeout_s: float) -> tuple[str, str]:
    """``communicate``; a process that has not ended in ``timeout_s`` fails the test with the
    Python stacks of every process of its session (py-spy, the dev extra) and its stderr, so a
    hang on a loaded CI host says where it was, then is killed."""
    try:
        return process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stacks = [_stacks_of(pid) for pid in session_members(process.pid)]
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        raise AssertionError(
            f"{process.args!r} did not end within {timeout_s} s; its stacks:\n"
            + "\n".join(stacks)
            + f"\nits stderr's end:\n{(stderr or '')[-3000:]}"
        ) from None


def session_members(sid: int) -> list[int]:
    return sorted(pid for pid, stat in procfs.read_all_stats().items() if stat.session == sid)


def _stacks_of(pid: int) -> str:
    command = command_of(pid)
    if "python" not in command:
        return f"== {pid} {command[:200]}"
    spy = Path(sys.executable).with_name("py-spy")
    try:
        dump = subprocess.run(
            [str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30
        )
        text = dump.stdout or dump.stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        text = f"(py-spy: {exc})"
    return f"== {pid} {command[:200]}\n{text}"


def children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (a worker forks attempts from its executor thread)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def start_local_dask_run(
    manifest: Path, out: Path, cache: Path, run_id: str, **popen: Any
) -> subprocess.Popen[Any]:
    """``metewand run`` of ``manifest`` on a two-worker local cluster, in a session of its own
    (so a test can end whatever a kill or an interrupt leaves in its group)."""
    command = [
        sys.executable,
        "-m",
        "metewand",
        "run",
        str(manifest),
        "--executor",
        "dask",
        "--dask-local",
        "2",
        "--run-id",
        run_id,
        "--no-progress",
        "--out",
        str(out),
        "--cache-dir",
        str(cache),
    ]
    return subprocess.Popen(command, env=dask_env(), start_new_session=True, **popen)


def wait_for_rows(results: Path, count: int, timeout_s: float = 120.0) -> None:
    """Until ``results`` holds ``count`` lines or the time is up (the caller checks how many)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if results.exists() and results.read_text().count("\n") >= count:
            return
        time.sleep(0.01)
