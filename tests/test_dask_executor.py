"""The Dask executor with real processes: a LocalCluster, a real ``dask scheduler`` and ``dask
worker`` processes on loopback, a worker killed mid-unit, a client killed mid-run, a refused worker.

The suite is ``dask_helpers``' pair-sleep kind: each attempt is a real ``sleep`` subprocess of the
worker and each slot a real ``cat`` process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import dask
import pytest

import dask_helpers as helpers
from metewand.runtime import provenance
from metewand.runtime.dask_executor import DaskExecutor, DaskExecutorError, quiet_worker_env
from metewand.runtime.dask_run import HOSTS_NAME, LOST_TRIES_NAME
from metewand.runtime.dask_worker import expected_identity, refusal_reason
from metewand.runtime.store import RunStore
from metewand.runtime.suite import build


def result_lines(run_dir: Path) -> list[dict[str, Any]]:
    text = (run_dir / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def lost_tries(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / LOST_TRIES_NAME
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_every_key_once(rows: list[dict[str, Any]], units: int) -> None:
    counts = Counter(row["key"] for row in rows)
    expected = {f"u{i}/{side}" for i in range(units) for side in "ab"}
    assert set(counts) == expected
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]


def assert_units_whole(rows: list[dict[str, Any]]) -> None:
    """Both attempts of a unit ran on one worker, one try, in order, on that worker's slot."""
    by_unit: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_unit.setdefault(row["key"].split("/")[0], []).append(row)
    for unit, pair in by_unit.items():
        a, b = sorted(pair, key=lambda r: r["key"])
        assert a["placement"] == b["placement"], unit
        assert a["runner_pid"] == b["runner_pid"] and a["slot_pid"] == b["slot_pid"], unit
        assert a["ended_unix"] <= b["started_unix"], unit


class RecordingReporter:
    def __init__(self) -> None:
        self.total = -1
        self.labels: list[str] = []
        self.finished: list[str] = []

    def factory(self, total: int) -> RecordingReporter:
        self.total = total
        return self

    def start(self) -> None:
        pass

    def attempt_started(self, label: str) -> None:
        self.labels.append(label)

    def attempt_finished(self, status: str) -> None:
        self.finished.append(status)

    def close(self) -> None:
        pass


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.slow
def test_local_cluster_runs_whole_units_on_reused_slots_one_at_a_time(tmp_path: Path) -> None:
    ref = helpers.ref(units=6, sleep_s=0.1)
    progress = RecordingReporter()
    with RunStore.create(tmp_path, "r", {}) as store:
        written = helpers.run_on_dask(store, ref, local_workers=2, reporter=progress.factory)
        assert store.manifest["state"] == "complete"
    rows = result_lines(tmp_path / "r")
    hosts = json.loads((tmp_path / "r" / HOSTS_NAME).read_text())
    assert [w["accepted"] for w in hosts["workers"]] == [True, True]
    assert_every_key_once(rows, 6)
    # progress names where each attempt ran, as it is written
    assert progress.total == 12 and progress.finished == ["passed"] * 12
    assert sorted(progress.labels) == sorted(
        f"{row['key']} on {row['placement']['host']}/{row['placement']['worker_name']}"
        for row in rows
    )
    assert_units_whole(rows)
    assert written == [row["key"] for row in rows] and hosts["lost_tries"] == 0
    assert {row["placement"]["host"] for row in rows} == {socket.gethostname()}
    workers = {row["placement"]["worker"] for row in rows}
    assert len(workers) == 2  # both workers took units
    for worker in workers:  # one slot per worker, reused by every later unit
        mine = [row for row in rows if row["placement"]["worker"] == worker]
        assert len({row["slot_pid"] for row in mine}) == 1
        spans = sorted((r["started_unix"], r["ended_unix"]) for r in mine)
        # one unit at a time on a worker (its host resource is 1): no two attempts overlap
        assert all(
            end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False)
        )
    slot_pids = {row["slot_pid"] for row in rows}
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in slot_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in slot_pids), "slots are closed when the cluster closes"
    assert hosts["rows_by_host"] == {socket.gethostname(): 12}
    for worker in hosts["workers"]:
        assert worker["accepted"] and worker["rows"] == 6
        assert worker["runner"]["source"]["tree_sha256"] == hosts["client_identity"]["tree_sha256"]
        assert "gate" in worker["host_summary"]  # each worker's own pollution verdict


@pytest.fixture
def scheduler_port() -> Any:
    port = helpers.free_port()
    scheduler = helpers.start_scheduler(port)
    started: list[subprocess.Popen[bytes]] = [scheduler]
    yield port, started
    for process in reversed(started):
        helpers.stop(process)


@pytest.mark.slow
def test_worker_killed_mid_unit_its_try_is_recorded_and_every_key_lands_once(
    tmp_path: Path, scheduler_port: Any
) -> None:
    port, started = scheduler_port
    doomed = helpers.start_worker(port, "doomed")
    survivor = helpers.start_worker(port, "survivor")
    started += [doomed, survivor]
    helpers.wait_for_workers(port, 2)
    killed = threading.Event()

    def kill_doomed_once_it_runs_an_attempt() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any("sleep" in helpers.command_of(c) for c in helpers.children(doomed.pid)):
                os.killpg(doomed.pid, signal.SIGKILL)  # the worker and its attempt's process
                killed.set()
                return
            time.sleep(0.02)

    units = 8
    ref = helpers.ref(units=units, sleep_s=0.3)
    address = f"tcp://127.0.0.1:{port}"
    with DaskExecutor(ref, scheduler=address) as executor:
        # the documented environment reaches a real `dask worker`: its profiler is off
        profiling = executor.client.run(dask.config.get, "distributed.worker.profile.enabled")
        assert set(profiling.values()) == {False}
    with RunStore.create(tmp_path, "r", {}) as store:
        killer = threading.Thread(target=kill_doomed_once_it_runs_an_attempt)
        killer.start()
        helpers.run_on_dask(store, ref, scheduler=address)
        killer.join()
    assert killed.is_set()
    rows = result_lines(tmp_path / "r")
    assert_every_key_once(rows, units)
    assert_units_whole(rows)
    lost = lost_tries(tmp_path / "r")
    hosts = json.loads((tmp_path / "r" / HOSTS_NAME).read_text())
    assert lost and hosts["lost_tries"] == len(lost)
    assert {record["worker_name"] for record in lost} == {"doomed"}
    by_key = {row["key"]: row for row in rows}
    for record in lost:
        retried = by_key[record["keys"][0]]["placement"]
        assert retried["worker_name"] == "survivor"
        assert record["retried_as"] == retried["try"] != record["try"]
    doomed_entry = [w for w in hosts["workers"] if w["worker_name"] == "doomed"]
    assert doomed_entry[0]["host_summary"] == {
        "unavailable": "the worker left the cluster before the run ended"
    }


def changed_source_copy(tmp_path: Path) -> Path:
    """A copy of metewand's source with one byte more: another source digest."""
    root = tmp_path / "other-checkout"
    shutil.copytree(
        provenance.package_root(), root / "metewand", ignore=shutil.ignore_patterns("__pycache__")
    )
    with (root / "metewand" / "errors.py").open("a") as handle:
        handle.write("# an edit the client does not have\n")
    return root


@pytest.mark.slow
def test_a_worker_running_other_source_is_refused_with_the_reason(
    tmp_path: Path, scheduler_port: Any
) -> None:
    port, started = scheduler_port
    started.append(helpers.start_worker(port, "stale", extra_path=changed_source_copy(tmp_path)))
    helpers.wait_for_workers(port, 1)
    ref = helpers.ref(units=2, sleep_s=0.05)
    with pytest.raises(DaskExecutorError, match="no Dask worker was accepted.*source digest"):
        DaskExecutor(ref, scheduler=f"tcp://127.0.0.1:{port}", registration_wait_s=20).__enter__()
    started.append(helpers.start_worker(port, "current"))
    started.append(helpers.start_worker(port, "no-host-resource", host_resource=False))
    started.append(helpers.start_worker(port, "no-metewand", with_metewand=False))
    helpers.wait_for_workers(port, 4)
    with RunStore.create(tmp_path, "r", {}) as store:
        helpers.run_on_dask(store, ref, scheduler=f"tcp://127.0.0.1:{port}")
    rows = result_lines(tmp_path / "r")
    assert_every_key_once(rows, 2)
    assert {row["placement"]["worker_name"] for row in rows} == {"current"}
    hosts = {
        w["worker_name"]: w
        for w in json.loads((tmp_path / "r" / HOSTS_NAME).read_text())["workers"]
    }
    assert hosts["current"]["accepted"]
    assert not hosts["stale"]["accepted"] and "source digest" in hosts["stale"]["reason"]
    assert not hosts["no-host-resource"]["accepted"]
    assert "--resources metewand-host=1" in hosts["no-host-resource"]["reason"]
    # a worker whose Python cannot import metewand cannot even load the run's plugin: refused
    # with why, while the others run (it used to stop the run at registration)
    assert not hosts["no-metewand"]["accepted"]
    assert (
        "cannot load metewand's worker plugin (ModuleNotFoundError"
        in hosts["no-metewand"]["reason"]
    )
    assert hosts["no-metewand"]["host_summary"] == {"unavailable": "the worker was refused"}


@pytest.mark.slow
def test_a_scheduler_without_metewand_is_refused_before_any_unit(tmp_path: Path) -> None:
    """The scheduler unpickles the run's tasks, which name metewand's functions: one from a
    Python without metewand stops the run at its start with why (exit 3, resumable), not with
    a deserialization error once the units are submitted."""
    port = helpers.free_port()
    started = [helpers.start_scheduler(port, with_metewand=False)]
    try:
        started.append(helpers.start_worker(port, "current"))
        helpers.wait_for_workers(port, 1)
        with RunStore.create(tmp_path, "r", {}) as store, pytest.raises(DaskExecutorError) as err:
            helpers.run_on_dask(
                store, helpers.ref(units=1, sleep_s=0.01), f"tcp://127.0.0.1:{port}"
            )
        assert "scheduler" in str(err.value) and "cannot load metewand" in str(err.value)
        assert "ModuleNotFoundError" in str(err.value)
        manifest = json.loads((tmp_path / "r" / "run_manifest.json").read_text())
        assert manifest["state"] == "interrupted"
        assert "cannot load metewand" in manifest["data"]["interruption_reason"]
        assert result_lines(tmp_path / "r") == []
    finally:
        for process in reversed(started):
            helpers.stop(process)


def test_a_worker_of_another_metewand_version_is_refused_with_both_versions() -> None:
    expected = expected_identity()
    runner = provenance.runner_facts()
    assert refusal_reason(expected, runner) is None
    runner["metewand_version"] = "0.0.9"
    reason = refusal_reason(expected, runner)
    assert (
        reason == f"metewand version 0.0.9 differs from the client's {expected['metewand_version']}"
    )


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in helpers.children(stack.pop()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def start_and_kill_client(
    tmp_path: Path, cluster: list[str], units: int
) -> tuple[list[str], list[dict[str, Any]], set[int]]:
    """A client process run until 4 rows are written, then ``kill -9``; its resume command."""
    command = [
        sys.executable,
        str(helpers.HERE / "dask_client.py"),
        str(tmp_path),
        "r",
        str(units),
        "0.2",
        *cluster,
    ]
    client = subprocess.Popen(command, env=helpers.dask_env(), stdout=subprocess.DEVNULL)
    results = tmp_path / "r" / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.exists() and results.read_text().count("\n") >= 4:
            break
        time.sleep(0.02)
    left_behind = descendants(client.pid)
    client.send_signal(signal.SIGKILL)
    client.wait()
    before = result_lines(tmp_path / "r")
    assert 4 <= len(before) < 2 * units, "the kill must land mid-run"
    return [*command, "--resume"], before, left_behind


def resume(command: list[str]) -> str:
    resumed = subprocess.run(
        command, env=helpers.dask_env(), capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    return resumed.stdout


@pytest.mark.slow
def test_client_kill_9_then_resume_gives_every_key_once(tmp_path: Path) -> None:
    units = 10
    command, before, left_behind = start_and_kill_client(tmp_path, ["--dask-local", "2"], units)
    # Dask's worker processes notice their parent's death and exit: nothing is left running
    deadline = time.monotonic() + 20
    while any(alive(pid) for pid in left_behind) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in left_behind if alive(pid)]
    stdout = resume(command)
    rows = result_lines(tmp_path / "r")
    assert_every_key_once(rows, units)
    assert rows[: len(before)] == before  # nothing written before the kill was rewritten
    assert f"written {2 * units - len(before)} " in stdout


@pytest.mark.slow
def test_client_kill_9_on_a_shared_cluster_then_resume_closes_the_dead_runs_slot(
    tmp_path: Path, scheduler_port: Any
) -> None:
    port, started = scheduler_port
    started.append(helpers.start_worker(port, "w"))
    helpers.wait_for_workers(port, 1)
    units = 8
    cluster = ["--scheduler", f"tcp://127.0.0.1:{port}"]
    command, before, _ = start_and_kill_client(tmp_path, cluster, units)
    dead_runs_slot = before[0]["slot_pid"]
    assert alive(dead_runs_slot)  # the worker outlives its client and still holds the slot
    stdout = resume(command)
    rows = result_lines(tmp_path / "r")
    assert_every_key_once(rows, units)
    assert f"written {2 * units - len(before)} " in stdout
    assert not alive(dead_runs_slot)  # the resumed run closed the orphaned slot first
    hosts = json.loads((tmp_path / "r" / HOSTS_NAME).read_text())
    assert len(hosts["closed_orphaned_slots"]) == 1


def test_the_documented_worker_environment_is_the_local_clusters_quiet_config() -> None:
    text = (helpers.REPO / "docs" / "dask.md").read_text()
    documented = dict(
        line.rstrip(" \\").split("=", 1) for line in text.splitlines() if line.startswith("DASK_")
    )
    assert documented == quiet_worker_env()
    assert "--nworkers 1 --nthreads 1 --resources metewand-host=1" in text


class ListSink:
    def __init__(self) -> None:
        self.labels: list[str] = []
        self.rows: list[dict[str, Any]] = []

    def attempt_started(self, label: str) -> None:
        self.labels.append(label)

    def attempt_finished(self, row: dict[str, Any]) -> None:
        self.rows.append(row)


@pytest.mark.slow
def test_the_run_lifecycles_executor_protocol_and_ctrl_c_stops_the_units_in_flight() -> None:
    quick, slow = helpers.ref(units=2, sleep_s=0.05), helpers.ref(units=2, sleep_s=60)
    with DaskExecutor(quick, local_workers=1) as executor:
        sink = ListSink()
        executor.run(build(quick), build(quick).units(), sink)
        assert sorted(row["key"] for row in sink.rows) == ["u0/a", "u0/b", "u1/a", "u1/b"]
        host = socket.gethostname()
        assert all(label.endswith(f" on {host}/0") for label in sink.labels)
        with pytest.raises(ValueError, match="built for"):
            executor.run(helpers.PairSleepSuite(1, 0, kind="other"), [], sink)
    with DaskExecutor(slow, local_workers=1) as executor:
        (worker_pid,) = executor.client.run(os.getpid).values()
        main = threading.main_thread().ident
        assert main is not None

        def ctrl_c_once_an_attempt_runs() -> None:
            while not any("sleep" in helpers.command_of(c) for c in helpers.children(worker_pid)):
                time.sleep(0.02)
            signal.pthread_kill(main, signal.SIGINT)

        threading.Thread(target=ctrl_c_once_an_attempt_runs, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            executor.run(build(slow), build(slow).units(), ListSink())
        assert time.monotonic() - started < 20  # not the 60 s the attempt would have slept
        deadline = time.monotonic() + 10
        while helpers.children(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [c for c in helpers.children(worker_pid) if "sleep" in helpers.command_of(c)]


@pytest.mark.slow
def test_a_run_whose_every_accepted_worker_died_stops_with_the_reason(
    tmp_path: Path, scheduler_port: Any
) -> None:
    port, started = scheduler_port
    only = helpers.start_worker(port, "only")
    started.append(only)
    helpers.wait_for_workers(port, 1)
    ref = helpers.ref(units=3, sleep_s=0.5)
    address = f"tcp://127.0.0.1:{port}"
    with DaskExecutor(ref, scheduler=address, no_worker_grace_s=2) as executor:
        killer = threading.Timer(1.0, os.killpg, (only.pid, signal.SIGKILL))
        killer.start()
        began = time.monotonic()
        with pytest.raises(DaskExecutorError, match="no accepted Dask worker left for 2 s"):
            list(executor.stream(build(ref).units()))
        killer.join()
        assert time.monotonic() - began < 15


def test_another_process_of_the_run_publishes_artifacts_while_the_client_holds_the_store(
    tmp_path: Path,
) -> None:
    publish = (
        "import sys; from metewand.runtime.shared_run import SharedRunView\n"
        "view = SharedRunView(sys.argv[1])\n"
        "with view.artifact_dir('u0/a') as staging:\n"
        "    (staging / 'out.txt').write_text('from the worker')\n"
        "print(sorted(view.finished_keys()))\n"
    )
    with RunStore.create(tmp_path, "r", {}) as store:
        store.append({"key": "u9/a", "status": "passed"})
        done = subprocess.run(
            [sys.executable, "-c", publish, str(store.run_dir)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "['u9/a']"  # it reads the client's rows
        assert (store.artifact_path("u0/a") / "out.txt").read_text() == "from the worker"
        store.append({"key": "u0/a", "status": "passed"})  # the client still writes the row
    staging = tmp_path / "r" / ".staging"
    assert not staging.exists() or not list(staging.iterdir())
