"""``metewand run --executor dask`` (issue #14 step 2) on the real sorting example: real Dask
LocalCluster worker processes, real implementation workers and evaluators, a real ``kill -9`` of
the client and a real ``--resume``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import dask_helpers as helpers

pytestmark = pytest.mark.slow

MANIFEST = helpers.REPO / "examples" / "sorting" / "metewand.toml"  # replaced below


@pytest.fixture(scope="module", autouse=True)
def _short_example(short_sorting: Path) -> None:
    """Every run here takes the example with 2 repetitions (30 attempts), not its shipped 10."""
    global MANIFEST
    MANIFEST = short_sorting


METEWAND = [sys.executable, "-m", "metewand"]


def metewand(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    command = [*METEWAND, *args, "--out", str(tmp_path / "runs")]
    if "--resume" not in args:
        command += ["--cache-dir", str(tmp_path / "cache")]
    return subprocess.run(
        command, env=helpers.dask_env(), capture_output=True, text=True, timeout=timeout
    )


def rows_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def planned_keys() -> list[str]:
    done = subprocess.run(
        [*METEWAND, "plan", str(MANIFEST), "--json"], capture_output=True, text=True, check=True
    )
    return [json.loads(line)["key"] for line in done.stdout.splitlines()]


def structure_differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ in structure: keys and nesting, numbers as one kind (a median
    may be an int in one run and a float in another). A null matches anything, and the keys of
    ``unavailable`` are not compared: a metric measured in one run can be unavailable in the
    other (the dataset cache was cold for the first run, warm for the second)."""
    if a is None or b is None:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        if path.endswith("/unavailable"):
            return []
        found = [f"{path}/{k}: only in one run" for k in sorted(set(a) ^ set(b))]
        for key in sorted(set(a) & set(b)):
            found += structure_differences(a[key], b[key], f"{path}/{key}")
        return found
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items against {len(b)}"]
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in structure_differences(x, y, f"{path}[{i}]")
        ]
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return []
    return [] if type(a) is type(b) else [f"{path}: {type(a).__name__} against {type(b).__name__}"]


def scores_of(run_dir: Path) -> Any:
    done = subprocess.run([*METEWAND, "report", str(run_dir)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((run_dir / "scores.json").read_text())


def test_sorting_on_a_local_dask_cluster_accepts_every_attempt_and_names_host_and_worker(
    tmp_path: Path,
) -> None:
    keys = planned_keys()
    dask_run = metewand(
        tmp_path,
        "run",
        str(MANIFEST),
        "--executor",
        "dask",
        "--dask-local",
        "2",
        "--run-id",
        "d",
        "--no-progress",
    )
    assert dask_run.returncode == 0, dask_run.stderr[-3000:]
    run_dir = tmp_path / "runs" / "d"
    rows = rows_of(run_dir)
    assert sorted(row["key"] for row in rows) == sorted(keys)  # every key, once
    assert {row["status"] for row in rows} == {"accepted"}
    hosts = json.loads((run_dir / "dask_hosts.json").read_text())
    accepted = {w["worker"] for w in hosts["workers"] if w["accepted"]}
    assert len(accepted) == 2
    for row in rows:
        where = row["placement"]
        assert where["executor"] == "dask" and where["host"] and where["worker"] in accepted
        assert (run_dir / "artifacts" / row["key"]).is_dir()  # published whole by its worker
    assert sum(hosts["rows_by_host"].values()) == len(keys)
    assert sum(w["rows"] for w in hosts["workers"]) == len(keys)
    assert hosts["lost_tries"] == 0 and not (run_dir / "lost_tries.jsonl").exists()
    # the end of the run names each worker's rows and the rows per host
    assert f"rows per host: {socket.gethostname()} {len(keys)}; lost tries: 0" in dask_run.stdout
    assert dask_run.stdout.count(" lost tries; accepted") == 2
    assert not (run_dir / ".work").exists()  # every worker's private work dir went with it

    local_run = metewand(tmp_path, "run", str(MANIFEST), "--run-id", "l", "--no-progress")
    assert local_run.returncode == 0, local_run.stderr[-3000:]
    local_dir = tmp_path / "runs" / "l"
    assert sorted(row["key"] for row in rows_of(local_dir)) == sorted(keys)
    dask_scores, local_scores = scores_of(run_dir), scores_of(local_dir)
    # a Dask run's scores add its per-host block (one host here: nothing is pooled); the rest
    # has the local run's structure
    hosts = dask_scores.pop("hosts")
    assert [h["host"] for h in hosts["per_host"]] == [socket.gethostname()]
    assert hosts["pooled"] is None and "hosts" not in local_scores
    assert structure_differences(dask_scores, local_scores) == []
    # the same cases and implementations, in the same order, scored in both
    assert [c["case"] for c in dask_scores["cases"]["cases"]] == [
        c["case"] for c in local_scores["cases"]["cases"]
    ]


def test_executor_flags_that_disagree_are_refused_before_anything_runs(tmp_path: Path) -> None:
    cases = [
        (["--dask-local", "2"], "--scheduler and --dask-local need --executor dask"),
        (["--executor", "dask"], "needs exactly one of --scheduler"),
        (
            ["--executor", "dask", "--dask-local", "1", "--scheduler", "tcp://127.0.0.1:1"],
            "needs exactly one of --scheduler",
        ),
        (["--executor", "dask", "--scheduler", "127.0.0.1:8786"], "expected tcp://HOST:PORT"),
        (["--executor", "dask", "--dask-local", "2", "--jobs", "2"], "--jobs is the local"),
    ]
    for flags, message in cases:
        done = metewand(tmp_path, "run", str(MANIFEST), *flags)
        assert done.returncode == 2, (flags, done.stderr)
        assert message in done.stderr, (flags, done.stderr)
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_scheduler_exits_3_and_leaves_the_run_resumable(tmp_path: Path) -> None:
    port = helpers.free_port()  # nothing listens there
    done = metewand(
        tmp_path,
        "run",
        str(MANIFEST),
        "--executor",
        "dask",
        "--scheduler",
        f"tcp://127.0.0.1:{port}",
        "--run-id",
        "u",
        "--no-progress",
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert f"cannot reach Dask scheduler tcp://127.0.0.1:{port}" in done.stderr
    assert "--resume" in done.stderr and "Traceback" not in done.stderr
    manifest = json.loads((tmp_path / "runs" / "u" / "run_manifest.json").read_text())
    assert manifest["state"] == "interrupted"


def test_client_kill_9_mid_run_then_resume_gives_every_key_exactly_once(tmp_path: Path) -> None:
    keys = planned_keys()
    client = helpers.start_local_dask_run(
        MANIFEST,
        tmp_path / "runs",
        tmp_path / "cache",
        "k",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        helpers.wait_for_rows(tmp_path / "runs" / "k" / "results.jsonl", 4)
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
        before = rows_of(tmp_path / "runs" / "k")
        assert 4 <= len(before) < len(keys), "the kill must land mid-run"
        _wait_for_group_to_end(client.pid)
        assert not _group_alive(client.pid), "Dask's workers notice their parent died and exit"
    finally:
        _kill_group(client.pid)
    resumed = metewand(
        tmp_path, "run", "--resume", "k", "--executor", "dask", "--dask-local", "2", "--no-progress"
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = rows_of(tmp_path / "runs" / "k")
    assert sorted(row["key"] for row in rows) == sorted(keys)  # every key exactly once
    assert rows[: len(before)] == before  # nothing written before the kill was rewritten
    assert {row["status"] for row in rows} == {"accepted"}
    assert f"{len(keys) - len(before)} already done" not in resumed.stdout
    assert f"{len(before)} already done" in resumed.stdout


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for_group_to_end(pgid: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


def _kill_group(pgid: int) -> None:
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)


@pytest.fixture
def two_workers() -> Any:
    """A real ``dask scheduler`` and two ``dask worker`` processes on loopback, as docs/dask.md
    tells an operator to start them (without a nanny, so a killed worker stays dead)."""
    port = helpers.free_port()
    started = [helpers.start_scheduler(port)]
    try:
        started += [helpers.start_worker(port, "doomed"), helpers.start_worker(port, "survivor")]
        helpers.wait_for_workers(port, 2)
        yield port, started[1]
    finally:
        for process in reversed(started):
            helpers.stop(process)


def test_a_worker_killed_mid_attempt_on_a_real_cluster_is_a_recorded_lost_try(
    tmp_path: Path, two_workers: Any
) -> None:
    port, doomed = two_workers
    keys = planned_keys()
    killed = threading.Event()

    def kill_doomed_once_it_runs_an_attempt() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any("sort" in helpers.command_of(c) for c in helpers.children(doomed.pid)):
                os.killpg(doomed.pid, signal.SIGKILL)  # the worker, mid-attempt
                killed.set()
                return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_doomed_once_it_runs_an_attempt)
    killer.start()
    done = metewand(
        tmp_path,
        "run",
        str(MANIFEST),
        "--executor",
        "dask",
        "--scheduler",
        f"tcp://127.0.0.1:{port}",
        "--run-id",
        "w",
        "--no-progress",
    )
    killer.join()
    assert killed.is_set()
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "runs" / "w"
    rows = rows_of(run_dir)
    assert sorted(row["key"] for row in rows) == sorted(keys)  # every key exactly once
    assert {row["status"] for row in rows} == {"accepted"}
    lost = [json.loads(line) for line in (run_dir / "lost_tries.jsonl").read_text().splitlines()]
    assert lost and {record["worker_name"] for record in lost} == {"doomed"}
    by_key = {row["key"]: row for row in rows}
    for record in lost:  # each lost try was run again, on the survivor, as another try
        retried = by_key[record["keys"][0]]["placement"]
        assert retried["worker_name"] == "survivor"
        assert record["retried_as"] == retried["try"] != record["try"]
    for record in lost:  # the lost unit (a pairing group) ran again whole, in one try
        assert {by_key[key]["placement"]["try"] for key in record["keys"]} == {record["retried_as"]}
    hosts = json.loads((run_dir / "dask_hosts.json").read_text())
    assert hosts["lost_tries"] == len(lost)
    assert not (run_dir / ".work").exists()  # the dead worker's private work dir went too
    # the report's per-host section: the lost tries, and the dead worker's telemetry unavailable
    (host,) = scores_of(run_dir)["hosts"]["per_host"]
    assert host["lost_tries"] == len(lost) and host["attempts"] == len(keys)
    doomed_entry = next(w for w in host["workers"] if w["worker_name"] == "doomed")
    assert doomed_entry["telemetry"] == {
        "unavailable": "the worker left the cluster before the run ended"
    }


def test_ctrl_c_mid_run_on_dask_exits_130_interrupted_and_resume_finishes(tmp_path: Path) -> None:
    keys = planned_keys()
    client = helpers.start_local_dask_run(
        MANIFEST,
        tmp_path / "runs",
        tmp_path / "cache",
        "c",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        helpers.wait_for_rows(tmp_path / "runs" / "c" / "results.jsonl", 4)
        client.send_signal(signal.SIGINT)
        _, stderr = helpers.communicate_or_explain(client, 60)
    finally:
        _wait_for_group_to_end(client.pid)
        _kill_group(client.pid)
    assert client.returncode == 130, stderr[-3000:]
    assert "interrupted: resume with --resume" in stderr and "Traceback" not in stderr
    manifest = json.loads((tmp_path / "runs" / "c" / "run_manifest.json").read_text())
    assert manifest["state"] == "interrupted"
    assert manifest["data"]["interruption_reason"] == "interrupted by signal"
    before = rows_of(tmp_path / "runs" / "c")
    assert len(before) < len(keys), "the interrupt must land mid-run"
    resumed = metewand(
        tmp_path, "run", "--resume", "c", "--executor", "dask", "--dask-local", "2", "--no-progress"
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = rows_of(tmp_path / "runs" / "c")
    assert sorted(row["key"] for row in rows) == sorted(keys)  # every key exactly once
    assert {row["status"] for row in rows} == {"accepted"}


def test_a_cluster_with_no_acceptable_worker_exits_3_with_the_reason(tmp_path: Path) -> None:
    port = helpers.free_port()
    started = [helpers.start_scheduler(port)]
    try:
        started.append(helpers.start_worker(port, "plain", host_resource=False))
        helpers.wait_for_workers(port, 1)
        done = metewand(
            tmp_path,
            "run",
            str(MANIFEST),
            "--executor",
            "dask",
            "--scheduler",
            f"tcp://127.0.0.1:{port}",
            "--run-id",
            "n",
            "--no-progress",
        )
    finally:
        for process in reversed(started):
            helpers.stop(process)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "no Dask worker was accepted for this run" in done.stderr
    assert "offers no metewand-host resource" in done.stderr and "Traceback" not in done.stderr
    manifest = json.loads((tmp_path / "runs" / "n" / "run_manifest.json").read_text())
    assert manifest["state"] == "interrupted"
    assert not (tmp_path / "runs" / "n" / "results.jsonl").read_text()
