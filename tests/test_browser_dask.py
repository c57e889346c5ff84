"""``metewand browser run --executor dask`` (issue #14 step 2, acceptance 3): real Chromium and
Lightpanda driven by real Dask LocalCluster worker processes, against the real fixture server,
compared with the same run on the local executor."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import dask_helpers as helpers
from browser_run_helpers import manifest_of, rows_of
from metewand.suites.browser.leftovers import run_processes

pytestmark = [pytest.mark.slow, pytest.mark.engines]

# Two tasks both engines pass and two that Lightpanda fails (a dialog it cannot handle, an L2
# answer it gets wrong): "the same statuses" then compares more than passes.
TASKS = ("own_ax_tree", "own_eval_values", "own_dialog_event", "own_l2_has_selector")
ENGINES = "chrome,lightpanda"


def browser(out: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "metewand", "browser", "run", *args, "--out", str(out)]
    return subprocess.run(
        command,
        env=helpers.dask_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=helpers.REPO,
    )


def new_run(out: Path, run_id: str, *flags: str) -> tuple[subprocess.CompletedProcess[str], float]:
    selection = [arg for task in TASKS for arg in ("--task", task)]
    started = time.perf_counter()
    done = browser(
        out,
        "--engines",
        ENGINES,
        "--k",
        "1",
        *selection,
        "--run-id",
        run_id,
        "--no-progress",
        *flags,
    )
    return done, time.perf_counter() - started


def statuses(run_dir: Path) -> dict[tuple[str, str], str]:
    return {(row["task_id"], row["engine"]): row["status"] for row in rows_of(run_dir)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One local and one ``--dask-local 2`` run of the same selection (their walls printed)."""
    out = tmp_path_factory.mktemp("browser-dask") / "runs"
    local, local_s = new_run(out, "local")
    assert local.returncode == 0, local.stderr[-3000:]
    dask, dask_s = new_run(out, "dask", "--executor", "dask", "--dask-local", "2")
    assert dask.returncode == 0, dask.stderr[-3000:]
    assert "Traceback" not in dask.stderr
    print(
        f"wall: local {local_s:.1f} s, dask --dask-local 2 {dask_s:.1f} s "
        f"({len(TASKS)} tasks x 2 engines, k=1)"
    )
    return {"out": out, "local": out / "local", "dask": out / "dask", "stderr": dask.stderr}  # type: ignore[dict-item]


def test_dask_gives_the_local_statuses_with_every_row_placed(runs: dict[str, Any]) -> None:
    local, dask = runs["local"], runs["dask"]
    assert statuses(dask) == statuses(local)
    assert len(statuses(dask)) == len(TASKS) * 2
    assert set(statuses(dask).values()) == {"pass", "fail"}, statuses(dask)
    hosts = json.loads((dask / "dask_hosts.json").read_text())
    accepted = {w["worker"] for w in hosts["workers"] if w["accepted"]}
    assert len(accepted) == 2 and hosts["describes_latest_session"] is True
    rows = rows_of(dask)
    for row in rows:
        assert row["placement"]["executor"] == "dask"
        assert row["placement"]["host"] == socket.gethostname()
        assert row["placement"]["worker"] in accepted
        for rel in row["artifacts"]:  # published whole by the worker into the client's run
            assert (dask / rel).is_file(), rel
    assert sum(hosts["rows_by_host"].values()) == len(rows)
    assert f"rows per host: {socket.gethostname()} {len(rows)}" in runs["stderr"]


def test_a_round_runs_whole_on_one_worker_in_the_balanced_order(runs: dict[str, Any]) -> None:
    by_round: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows_of(runs["dask"]):
        by_round[row["order"]["round"]].append(row)
    local_order = {row["key"]: row["order"] for row in rows_of(runs["local"])}
    for round_rows in by_round.values():
        assert len({row["placement"]["try"] for row in round_rows}) == 1, round_rows
        by_position = sorted(round_rows, key=lambda row: row["order"]["position"])
        assert by_position == sorted(round_rows, key=lambda row: row["started_at"])
        for row in round_rows:  # the same plan: the same rounds and positions as local
            assert row["order"] == local_order[row["key"]]


def test_worker_facts_reach_the_client_manifest(runs: dict[str, Any]) -> None:
    dask = runs["dask"]
    manifest = manifest_of(dask)
    data = manifest["data"]
    assert manifest["state"] == "complete"
    host = socket.gethostname()
    for engine in ENGINES.split(","):
        identity = data["engines"][engine]
        assert len(identity["binary_sha256"]) == 64 and identity["version_output"]
        assert data["engines_by_host"][host][engine]["binary_sha256"] == identity["binary_sha256"]
        assert manifest["engines"][engine]["sha256"] == identity["binary_sha256"]  # peer fields
        for row in rows_of(dask):
            if row["engine"] == engine:
                assert row["engine_provenance"]["binary_sha256"] == identity["binary_sha256"]
    workers_with_rows = {row["placement"]["worker_name"] for row in rows_of(dask)}
    assert set(data["teardown"]) == {f"dask-{name}" for name in workers_with_rows}
    for reports in data["teardown"].values():
        assert all(report["clean"] for report in reports.values()), reports
    assert {p.name for p in (dask / "engine_logs").iterdir()} == set(data["teardown"])
    assert [s["executor"] for s in data["executor_sessions"]] == ["dask"]
    assert run_processes(dask, "dask") == []  # no engine outlived the run


def test_derived_files_match_the_local_run(runs: dict[str, Any]) -> None:
    local, dask = runs["local"], runs["dask"]
    by_engine = {
        name: json.loads((runs[name] / "scores.json").read_text())["by_engine"]
        for name in ("local", "dask")
    }
    for engine in ENGINES.split(","):
        assert by_engine["dask"][engine]["attempts"] == by_engine["local"][engine]["attempts"]
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "report", str(dask), "--format", "md,json"],
        capture_output=True,
        text=True,
        env=helpers.dask_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    card = (dask / "scorecard.md").read_text()
    assert "chrome" in card and "lightpanda" in card
    assert local.is_dir()


def test_sessions_on_either_executor_keep_dask_hosts_honest(runs: dict[str, Any]) -> None:
    """A run resumed on the other executor: the local session marks the Dask session's record as
    not its own; a cut round (its last engine's row missing) runs only that engine on Dask."""
    out, dask = runs["out"], runs["dask"]
    resumed = browser(out, "--resume", "dask", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    hosts = json.loads((dask / "dask_hosts.json").read_text())
    assert hosts["describes_latest_session"] is False
    assert [s["executor"] for s in hosts["later_sessions"]] == ["local"]
    assert "rows per host" not in resumed.stderr
    sessions = manifest_of(dask)["data"]["executor_sessions"]
    assert [s["executor"] for s in sessions] == ["dask", "local"]

    # the reverse: a local run whose last round was cut after its first engine, resumed on Dask
    local = runs["local"]
    lines = (local / "results.jsonl").read_text().splitlines(keepends=True)
    last = json.loads(lines[-1])
    assert last["order"]["position"] > 0, "the cut must leave the round's first engine done"
    (local / "results.jsonl").write_text("".join(lines[:-1]))
    resumed = browser(
        out, "--resume", "local", "--no-progress", "--executor", "dask", "--dask-local", "1"
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    rows = rows_of(local)
    assert [row["key"] for row in rows] == [json.loads(line)["key"] for line in lines]
    assert [row["key"] for row in rows if "placement" in row] == [last["key"]]
    assert rows[-1]["status"] == last["status"]
    hosts = json.loads((local / "dask_hosts.json").read_text())
    assert hosts["rows_before_session"] == len(lines) - 1
    assert hosts["rows_by_host"] == {socket.gethostname(): 1}
    sessions = manifest_of(local)["data"]["executor_sessions"]
    assert [s["executor"] for s in sessions] == ["local", "dask"]


def test_executor_flags_are_checked_before_the_run_exists(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    cases = [
        (["--dask-local", "2"], "--scheduler and --dask-local need --executor dask"),
        (["--executor", "dask"], "needs exactly one of --scheduler"),
        (["--executor", "dask", "--dask-local", "1", "--jobs", "2"], "--jobs is the local"),
        (["--executor", "dask", "--scheduler", "127.0.0.1:1"], "expected tcp://HOST:PORT"),
    ]
    for flags, message in cases:
        done = browser(out, "--engines", "chrome", "--task", "own_ax_tree", *flags)
        assert done.returncode == 2, (flags, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr, (flags, done.stderr)
    assert not out.exists() or not any(out.iterdir())


def test_an_unreachable_scheduler_exits_3_with_the_run_resumable(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    port = helpers.free_port()  # nothing listens there
    done = browser(
        out,
        "--engines",
        "chrome",
        "--task",
        "own_ax_tree",
        "--run-id",
        "u",
        "--executor",
        "dask",
        "--scheduler",
        f"tcp://127.0.0.1:{port}",
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert f"cannot reach Dask scheduler tcp://127.0.0.1:{port}" in done.stderr
    assert f"--resume {out / 'u'}" in done.stderr and "Traceback" not in done.stderr
    manifest = manifest_of(out / "u")
    assert manifest["state"] == "interrupted"
    assert "cannot reach Dask scheduler" in manifest["data"]["interruption_reason"]
    resumed = browser(out, "--resume", "u", "--no-progress")  # resumable: here, locally
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [row["status"] for row in rows_of(out / "u")] == ["pass"]


def test_ctrl_c_on_dask_closes_every_worker_slot_and_resume_runs_what_is_left(
    tmp_path: Path,
) -> None:
    """Ctrl-C mid-run: exit 130, the run interrupted, each worker's slot closed with its teardown
    report in the client's manifest and no engine of the run left; --resume (here locally, the
    other executor) then runs exactly the attempts without a row."""
    import os
    import signal

    out = tmp_path / "runs"
    selection = [
        arg
        for task in (*TASKS, "own_load_events", "own_dom_saved_chain")
        for arg in ("--task", task)
    ]
    command = [
        sys.executable,
        "-m",
        "metewand",
        "browser",
        "run",
        "--engines",
        ENGINES,
        *selection,
        "--run-id",
        "c",
        "--no-progress",
        "--out",
        str(out),
        "--executor",
        "dask",
        "--dask-local",
        "2",
    ]
    client = subprocess.Popen(
        command,
        env=helpers.dask_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=helpers.REPO,
    )
    results = out / "c" / "results.jsonl"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if results.exists() and results.read_text().count("\n") >= 2:
                break
            time.sleep(0.01)
        client.send_signal(signal.SIGINT)
        _, stderr = helpers.communicate_or_explain(client, 90)
    finally:
        if client.poll() is None:
            os.killpg(client.pid, signal.SIGKILL)
            client.wait()
    assert client.returncode == 130, stderr[-3000:]
    assert "interrupted: " in stderr and "Traceback" not in stderr
    manifest = manifest_of(out / "c")
    assert manifest["state"] == "interrupted"
    assert manifest["data"]["interruption_reason"] == "interrupted by signal"
    before = rows_of(out / "c")
    assert 2 <= len(before) < 12, "the interrupt must land mid-run"
    teardown = manifest["data"]["teardown"]
    assert {f"dask-{row['placement']['worker_name']}" for row in before} <= set(teardown)
    for reports in teardown.values():
        assert all(report["clean"] for report in reports.values()), reports
    assert run_processes(out / "c", "c") == []

    resumed = browser(out, "--resume", "c", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = rows_of(out / "c")
    assert rows[: len(before)] == before
    assert len({row["key"] for row in rows}) == len(rows) == 12


@pytest.fixture
def two_workers() -> Any:
    """A real ``dask scheduler`` and two ``dask worker`` processes on loopback, started as
    docs/dask.md tells an operator (without a nanny, so a killed worker stays dead)."""
    port = helpers.free_port()
    started = [helpers.start_scheduler(port)]
    try:
        started += [helpers.start_worker(port, "doomed"), helpers.start_worker(port, "survivor")]
        helpers.wait_for_workers(port, 2)
        yield port, started[1]
    finally:
        for process in reversed(started):
            helpers.stop(process)


def test_a_worker_killed_mid_round_reruns_the_round_on_the_survivor(
    tmp_path: Path, two_workers: Any
) -> None:
    import os
    import signal
    import threading

    port, doomed = two_workers
    killed = threading.Event()

    def kill_doomed_once_it_drives_an_engine() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            commands = [helpers.command_of(c) for c in helpers.children(doomed.pid)]
            if any("chromium" in c or "lightpanda" in c for c in commands):
                os.kill(doomed.pid, signal.SIGKILL)  # the worker, inside a round
                killed.set()
                return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_doomed_once_it_drives_an_engine)
    killer.start()
    out = tmp_path / "runs"
    done, _ = new_run(out, "w", "--executor", "dask", "--scheduler", f"tcp://127.0.0.1:{port}")
    killer.join()
    assert killed.is_set()
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = out / "w"
    rows = rows_of(run_dir)
    assert len({row["key"] for row in rows}) == len(rows) == len(TASKS) * 2  # every key once
    lost = [json.loads(line) for line in (run_dir / "lost_tries.jsonl").read_text().splitlines()]
    assert lost and {record["worker_name"] for record in lost} == {"doomed"}
    by_key = {row["key"]: row for row in rows}
    for record in lost:  # the whole round ran again, on the survivor, as another try
        retried = [by_key[key]["placement"] for key in record["keys"]]
        assert {where["worker_name"] for where in retried} == {"survivor"}
        assert {where["try"] for where in retried} == {record["retried_as"]} != {record["try"]}
    hosts = json.loads((run_dir / "dask_hosts.json").read_text())
    doomed_record = next(w for w in hosts["workers"] if w["worker_name"] == "doomed")
    assert "unavailable" in doomed_record["host_summary"]
    # the killed worker's engines outlived it; the client's end-of-run sweep (same host) got them
    assert run_processes(run_dir, "w") == []


def test_without_the_dask_extra_both_commands_exit_3_before_the_run_exists(
    tmp_path: Path,
) -> None:
    """The extra cannot be uninstalled from the shared environment, so a ``distributed`` that
    fails to import stands in for it (fault injection)."""
    import os

    shim = tmp_path / "shim" / "distributed"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError(\"No module named 'distributed'\")\n")
    env = helpers.dask_env()
    env["PYTHONPATH"] = os.pathsep.join([str(shim.parent), env["PYTHONPATH"]])
    out = tmp_path / "runs"
    commands = [
        ["browser", "run", "--engines", "chrome", "--task", "own_ax_tree"],
        ["run", str(helpers.REPO / "examples" / "sorting" / "metewand.toml")],
    ]
    for command in commands:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "metewand",
                *command,
                "--out",
                str(out),
                "--executor",
                "dask",
                "--dask-local",
                "1",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 3, (command, done.stderr[-2000:])
        assert "--executor dask needs the dask extra" in done.stderr
        assert "Traceback" not in done.stderr
    assert not out.exists()


def test_a_profiled_run_on_two_local_workers_judges_each_as_a_place(tmp_path: Path) -> None:
    """Acceptance 1 of issue 26, on a small selection: two LocalCluster workers share this
    host, so each is a measuring place of its own (``host/worker``), with its own cold starts,
    calibration twins and verdict; the card says whether they were pooled and why."""
    out = tmp_path / "runs"
    selection = [arg for task in TASKS[:2] for arg in ("--task", task)]
    done = browser(
        out,
        "--engines",
        ENGINES,
        "--k",
        "2",
        *selection,
        "--run-id",
        "prof",
        "--no-progress",
        "--resource-profile",
        "engine",
        "--resource-calibration",
        "interleaved",
        "--cold-start-samples",
        "1",
        "--executor",
        "dask",
        "--dask-local",
        "2",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = out / "prof"
    host = socket.gethostname()
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    places = {row["placement"]["place"] for row in rows}
    assert places <= {f"{host}/0", f"{host}/1"} and len(rows) == 2 * 2 * 2 * 2
    cold = [json.loads(line) for line in (run_dir / "cold_start.jsonl").read_text().splitlines()]
    assert {c["placement"]["place"] for c in cold} == places  # each place its own launches
    assert len(cold) == len(places) * 2
    summary = json.loads((run_dir / "resource_summary.json").read_text())
    assert summary["hosts"]["places"] == sorted(places)
    for level in summary["hosts"]["per_host"].values():
        assert level["calibration"]["mode"] == "interleaved"
        assert level["fingerprint"]["usable_cores"] == len(os.sched_getaffinity(0))
    assert summary["eligibility_conditions"][-1]["id"] == "one_host"
    assert "### Per-host verdicts" in (run_dir / "resource-card.md").read_text()
    assert run_processes(run_dir, "prof") == []
