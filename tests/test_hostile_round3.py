"""Issue 27 items 8 (compare), 9-13: surfaces that gave tracebacks, wrong exit codes or wrong
words. Each through the real CLI (or a real worker process), each failing on the code before.

8.  ``compare --resamples 1000000000`` ran without a limit: now exit 2 at once.
9.  Dask: a malformed ``tcp://`` address was "harness failed", exit 1, after the run directory
    existed; ``--dask-local 100000`` had no cap; a scheduler killed mid-run gave exit 1
    (AttributeError). Now exit 2 with nothing written, a cap, and exit 3 with the run resumable.
10. A corpus whose subsets entry is a string, a resumed compute row without ``record``, a run
    manifest without ``run_id``: tracebacks or a KeyError that left the run interrupted.
11. A worker that closes its protocol pipe and stays alive is a ``protocol_error``, not an
    ``implementation_crash``; ``runner = "java"`` is said at the runner.
12. Text from a run in scorecard.md is escaped as report.html escapes it.
13. ``status`` shows a compute run's planned count; a negative ``sleep_ms`` and a scene URL naming
    a registry file are refused; ``inspect`` and ``report`` refuse a directory without
    ``run_manifest.json``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import ABOUT_BLANK_TASK, cli, tiny_corpus
from compute_helpers import run
from metewand import canonical
from synthetic_runs import write_browser_run, write_compute_run
from test_compute_hostile import hostile_manifest

HOSTILE_TEXT = "<script>alert(1)</script>"


def _metewand(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metewand", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr[-2000:])


@pytest.fixture(scope="module")
def finished_compute_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("r3")
    return Path(run(hostile_manifest(tmp), tmp, host_sample_interval_s=None).run_dir)


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / run_dir.name
    subprocess.run(["cp", "-a", str(run_dir), str(target)], check=True)
    return target


# ---- 8 ----


def test_compare_refuses_a_resample_count_past_the_cap(tmp_path: Path) -> None:
    runs = [write_compute_run(tmp_path / name, attempts=3) for name in ("a", "b")]
    started = time.monotonic()
    done = _metewand("compare", *map(str, runs), "--resamples", "1000000000", cwd=tmp_path)
    _refused(done, "--resamples", "100000")
    assert time.monotonic() - started < 30


# ---- 9 ----


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("tcp://127.0.0.1", "no port"),
        ("tcp://127.0.0.1:abc", "integer"),
        ("tcp://[::1", "IPv6"),
        ("tcp://:8786", "no host"),
    ],
)
def test_a_malformed_scheduler_address_is_refused_before_the_run_exists(
    tmp_path: Path, address: str, why: str
) -> None:
    manifest = hostile_manifest(tmp_path)
    done = _metewand(
        "run",
        str(manifest),
        "--out",
        "runs",
        "--executor",
        "dask",
        "--scheduler",
        address,
        cwd=tmp_path,
    )
    _refused(done, address, why)
    assert not (tmp_path / "runs").exists()


def test_dask_local_is_capped(tmp_path: Path) -> None:
    manifest = hostile_manifest(tmp_path)
    done = _metewand(
        "run",
        str(manifest),
        "--out",
        "runs",
        "--executor",
        "dask",
        "--dask-local",
        "100000",
        cwd=tmp_path,
    )
    _refused(done, "--dask-local", "64")
    assert not (tmp_path / "runs").exists()


@pytest.mark.timeout(300)
def test_a_scheduler_killed_mid_run_exits_3_and_the_run_resumes(tmp_path: Path) -> None:
    from dask_helpers import free_port, start_scheduler, start_worker, stop, wait_for_workers

    manifest = hostile_manifest(tmp_path)
    manifest.write_text(
        manifest.read_text().replace('name = "hostile"', 'name = "hostile"\nrepetitions = 40')
    )
    port = free_port()
    scheduler = start_scheduler(port)
    worker = start_worker(port, "w1")
    try:
        wait_for_workers(port, 1)
        runner = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "metewand",
                "run",
                str(manifest),
                "--out",
                "runs",
                "--run-id",
                "d1",
                "--executor",
                "dask",
                "--scheduler",
                f"tcp://127.0.0.1:{port}",
                "--host-telemetry",
                "off",
                "--no-progress",
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        results = tmp_path / "runs" / "d1" / "results.jsonl"
        deadline = time.monotonic() + 120
        while not (results.exists() and results.read_text().count("\n") >= 1):
            assert runner.poll() is None, runner.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(scheduler.pid, signal.SIGKILL)
        _out, err = runner.communicate(timeout=180)
    finally:
        stop(worker)
        stop(scheduler)
    assert runner.returncode == 3, err[-3000:]
    assert "Traceback" not in err and "went away" in err
    status = json.loads(_metewand("status", "runs/d1", "--json", cwd=tmp_path).stdout)
    assert status["state"] == "interrupted" and status["unfinished"] > 0
    done = _metewand(
        "run",
        "--resume",
        "d1",
        "--out",
        "runs",
        "--host-telemetry",
        "off",
        cwd=tmp_path,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]


# ---- 10 ----


def test_a_corpus_whose_subsets_entry_is_a_string_is_refused_naming_it(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "c", {"t.json": ABOUT_BLANK_TASK})
    manifest = json.loads((corpus / "manifest.json").read_text())
    manifest["layers"][0]["subsets"] = "t.raw"
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "chrome",
        "--out",
        str(tmp_path / "runs"),
        "--no-progress",
    )
    _refused(done, "manifest.json", "$.layers[0].subsets", "must be a list")
    assert not (tmp_path / "runs").exists()


def test_a_resumed_compute_row_without_its_record_is_refused_naming_the_line(
    finished_compute_run: Path, tmp_path: Path
) -> None:
    run_dir = _copy(finished_compute_run, tmp_path)
    manifest = run_dir / "run_manifest.json"
    data = json.loads(manifest.read_text())
    data["state"] = "interrupted"
    manifest.write_bytes(canonical.dumps(data))
    row = json.loads((run_dir / "results.jsonl").read_text())
    del row["record"]
    (run_dir / "results.jsonl").write_bytes(canonical.line(row))
    before = manifest.read_bytes()
    done = _metewand("run", "--resume", str(run_dir), "--host-telemetry", "off", cwd=tmp_path)
    _refused(done, "results.jsonl:1", "record")
    assert manifest.read_bytes() == before  # refused before touching the run


@pytest.mark.parametrize(
    ("reader", "change", "words"),
    [
        ("status", ("run_id", None), ["'run_id' must be a string"]),
        ("report", ("selected_engines", 5), ["'selected_engines' must be a list of strings"]),
        ("compare", ("selected_engines", [5]), ["'selected_engines' must be a list of strings"]),
        ("report", ("data", []), ["not a run manifest"]),
    ],
)
def test_a_malformed_run_manifest_is_named_not_a_traceback(
    tmp_path: Path, reader: str, change: tuple[str, Any], words: list[str]
) -> None:
    base = write_browser_run(tmp_path / "base", n_tasks=2, k=1)
    run_dir = write_browser_run(tmp_path / "bad", n_tasks=2, k=1)
    data = json.loads((run_dir / "run_manifest.json").read_text())
    key, value = change
    if key == "run_id":
        del data[key]
    elif key == "data":
        data[key] = value
    else:
        data["data"][key] = value
    (run_dir / "run_manifest.json").write_bytes(canonical.dumps(data))
    args = {
        "status": [str(run_dir)],
        "report": [str(run_dir), "--out", "out"],
        "compare": [str(base), str(run_dir)],
    }[reader]
    _refused(_metewand(reader, *args, cwd=tmp_path), "run_manifest.json", *words)


# ---- 11 ----


@pytest.mark.timeout(120)
def test_a_worker_that_closes_its_protocol_pipe_and_lives_is_a_protocol_error(
    tmp_path: Path,
) -> None:
    summary = run(
        hostile_manifest(tmp_path, impl="close_protocol_live"),
        tmp_path,
        host_sample_interval_s=None,
    )
    (row,) = summary.rows
    assert row["status"] == "failed"
    assert row["code"] == "protocol_error", row.get("message")


def test_an_unknown_runner_is_named_at_the_runner(tmp_path: Path) -> None:
    manifest = hostile_manifest(tmp_path)
    manifest.write_text(manifest.read_text().replace('runner = "python"', 'runner = "java"', 1))
    done = _metewand("run", str(manifest), "--out", "runs", cwd=tmp_path)
    _refused(done, "runner: must be one of python, command; got 'java'")
    assert "program" not in done.stderr


# ---- 12 ----


def test_text_from_a_run_is_escaped_in_the_scorecard(tmp_path: Path) -> None:
    run_dir = write_browser_run(tmp_path / "b", n_tasks=2, k=1)
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    for row in rows:  # what an adapter's text reaches: its path's cells and reasons
        row["driver_path"] = "path" + HOSTILE_TEXT
        row["driver_resources"] = _driver_resources({"cpu": HOSTILE_TEXT, "memory": "m"})
    (run_dir / "results.jsonl").write_bytes(b"".join(canonical.line(r) for r in rows))
    done = _metewand("report", str(run_dir), "--format", "md", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "out" / "scorecard.md").read_text()
    assert "<script>" not in card and "&lt;script&gt;alert(1)&lt;/script&gt;" in card


def _driver_resources(unavailable: dict[str, str]) -> dict[str, Any]:
    return {
        "schema": "metewand_driver_resources/1",
        "scope": "harness_scope",
        "process": "adapter",
        "cpu_total_ms": None,
        "peak_memory_bytes": None,
        "wall_ms": 1.0,
        "accounting_backend": None,
        "quality_flags": [],
        "unavailable": unavailable,
    }


# ---- 13 ----


def test_status_shows_a_compute_runs_planned_count(
    finished_compute_run: Path, tmp_path: Path
) -> None:
    done = _metewand("status", str(finished_compute_run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 finished of 1 planned, 0 unfinished" in done.stdout


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"steps": [{"sleep_ms": -5}]}, ["$.driver.steps[0].sleep_ms", "duration"]),
        (
            {"scene": {"kind": "self_hosted_fixture", "url": "/fixtures/routes.json"}},
            ["$.scene.url", "/fixtures/routes.json"],
        ),
    ],
)
def test_a_negative_sleep_or_a_scene_naming_a_registry_file_is_refused(
    tmp_path: Path, change: dict[str, Any], words: list[str]
) -> None:
    task = json.loads(json.dumps(ABOUT_BLANK_TASK))
    if "steps" in change:
        task["driver"]["steps"] = change["steps"]
    else:
        task["scene"] = change["scene"]
    corpus = tiny_corpus(tmp_path / "c", {"t.json": task})
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "chrome",
        "--out",
        str(tmp_path / "runs"),
        "--no-progress",
    )
    _refused(done, *words)


@pytest.mark.parametrize("reader", [["inspect", "--key", "x"], ["report", "--format", "md"]])
def test_inspect_and_report_refuse_a_directory_without_a_manifest(
    finished_compute_run: Path, tmp_path: Path, reader: list[str]
) -> None:
    run_dir = _copy(finished_compute_run, tmp_path)
    (run_dir / "run_manifest.json").unlink()
    done = _metewand(reader[0], str(run_dir), *reader[1:], cwd=tmp_path)
    _refused(done, "run_manifest.json")


@pytest.mark.engines
@pytest.mark.timeout(180)
def test_sigterm_of_a_browser_run_mid_attempt_leaves_no_unclosed_session(tmp_path: Path) -> None:
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "metewand",
            "browser",
            "run",
            "--engines",
            "chrome",
            "--task",
            "own_slow_page",
            "--k",
            "5",
            "--out",
            str(tmp_path / "runs"),
            "--run-id",
            "s",
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    results = tmp_path / "runs" / "s" / "results.jsonl"
    deadline = time.monotonic() + 120
    while not (results.exists() and results.read_text().count("\n") >= 1):
        assert runner.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)  # inside the next attempt (a slow page: seconds long)
    runner.send_signal(signal.SIGTERM)
    _out, err = runner.communicate(timeout=120)
    assert runner.returncode == 130, err[-2000:]
    assert "Unclosed client session" not in err and "Traceback" not in err
