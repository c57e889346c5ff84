"""Exit statuses as README's table says, per command and outcome, with real runs.

compute ``run``: 0 all accepted, 1 any attempt failed (warnings by code last), 2 invalid input,
3 a missing worker command; ``status`` after ``kill -9`` says interrupted. ``browser run``: 0
when the run completed even with failed tasks, 1 on crash/infra or a ``--fail-on`` status.
Readers (report, inspect, status, export) exit 2 on a RUN that names no run.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from browser_run_helpers import ABOUT_BLANK_TASK, rows_of, tiny_corpus
from compute_helpers import problem, python_impl, write_manifest

EXPERIMENT = """
[[experiments]]
name = "e"
problem = "answer"
implementations = [{impls}]
repetitions = 1
"""


def metewand(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metewand", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _manifest(directory: Path, modes: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    impls = "".join(python_impl(name, mode) for name, mode in modes.items())
    names = ", ".join(f'"{n}"' for n in modes)
    return write_manifest(directory, problem() + impls + EXPERIMENT.format(impls=names))


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr


def test_run_exits_0_when_all_accepted_with_relative_out_from_another_dir(tmp_path: Path) -> None:
    _manifest(tmp_path / "bench", {"good": "ok"})
    done = metewand(
        "run",
        "bench/metewand.toml",
        "--out",
        "results",
        "--run-id",
        "r",
        "--no-progress",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rows = rows_of(tmp_path / "results" / "r")
    assert [r["status"] for r in rows] == ["accepted"]
    manifest = json.loads((tmp_path / "results" / "r" / "run_manifest.json").read_text())
    assert manifest["data"]["manifest_path"] == str(tmp_path / "bench" / "metewand.toml")


def test_no_report_writes_no_derived_files_and_report_writes_them_later(tmp_path: Path) -> None:
    _manifest(tmp_path, {"good": "ok"})
    done = metewand("run", "--run-id", "r", "--no-progress", "--no-report", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "runs" / "r"
    assert f"derived files not written (--no-report): metewand report {run}" in done.stderr
    derived = ("scores.json", "scorecard.md", "report.html", "results.csv")
    assert not any((run / name).exists() for name in derived)
    assert [r["status"] for r in rows_of(run)] == ["accepted"]
    later = metewand("report", "runs/r", cwd=tmp_path)
    assert later.returncode == 0, later.stderr
    assert all((run / name).is_file() for name in derived)


def test_run_exits_1_when_an_attempt_failed_and_says_which_code_last(tmp_path: Path) -> None:
    _manifest(tmp_path, {"good": "ok", "bad": "crash"})
    done = metewand("run", "metewand.toml", "--run-id", "r", "--no-progress", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    statuses = sorted(r["status"] for r in rows_of(tmp_path / "runs" / "r"))
    assert statuses == ["accepted", "failed"]
    code = next(r["code"] for r in rows_of(tmp_path / "runs" / "r") if r["status"] == "failed")
    warning = f"warning: 1 of 2 attempts failed: {code} 1"
    assert warning in done.stderr, done.stderr
    # where the user looks: after the progress and the summary table
    assert done.stderr.rstrip().splitlines()[-1].startswith("warning:"), done.stderr
    _no_traceback(done)


def test_run_exits_2_on_an_invalid_manifest_and_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / "metewand.toml").write_text('version = 1\nname = "x"\nbogus = 1\n')
    done = metewand("run", "--no-progress", cwd=tmp_path)
    assert done.returncode == 2 and "metewand.toml" in done.stderr and "bogus" in done.stderr
    assert not (tmp_path / "runs").exists()
    _no_traceback(done)


@pytest.mark.parametrize(
    "args",
    [
        ("status", "nope"),
        ("export", "nope"),
        ("report", "nope"),
        ("inspect", "nope", "--key", "k"),
        ("run", "--resume", "nope"),
        ("browser", "run", "--resume", "nope"),
    ],
)
def test_readers_exit_2_on_a_run_that_does_not_exist(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = metewand(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "'nope'" in done.stderr and str(tmp_path / "runs" / "nope") in done.stderr
    _no_traceback(done)


def test_readers_take_an_id_a_path_or_latest_alike(tmp_path: Path) -> None:
    _manifest(tmp_path, {"good": "ok"})
    assert metewand("run", "--run-id", "r1", "--quiet", cwd=tmp_path).returncode == 0
    assert metewand("run", "--run-id", "r2", "--quiet", cwd=tmp_path).returncode == 0
    for run, expected in (
        ("r1", "r1"),
        ("runs/r1", "r1"),
        (str(tmp_path / "runs/r1"), "r1"),
        ("latest", "r2"),
    ):
        status = metewand("status", run, "--json", cwd=tmp_path)
        assert json.loads(status.stdout)["run_id"] == expected, (run, status.stderr)
        exported = metewand("export", run, "--format", "jsonl", cwd=tmp_path)
        assert exported.returncode == 0 and len(exported.stdout.splitlines()) == 1
        key = json.loads(exported.stdout)["key"]
        shown = metewand("inspect", run, "--key", key, "--json", cwd=tmp_path)
        assert json.loads(shown.stdout)["key"] == key, shown.stderr
        written = metewand("report", run, "--format", "md", "--json", cwd=tmp_path)
        assert json.loads(written.stdout)["md"] == str(
            tmp_path / "runs" / expected / "scorecard.md"
        )
    reports = metewand("report", "r1", "--json", cwd=tmp_path)
    for kind, path in json.loads(reports.stdout).items():  # normal permissions, not mkstemp's 0600
        assert os.stat(path).st_mode & 0o777 == 0o666 & ~_umask(), (kind, path)


def _umask() -> int:
    current = os.umask(0)  # this test process's; the subprocess inherits it
    os.umask(current)
    return current


SLEEPER = """
import sys, time
from metewand.worker import Evaluator, Implementation

if sys.argv[1] == "impl":
    impl = Implementation()

    @impl.execute
    def execute(state, result_dir):
        time.sleep(30)
        return {"answer": 42}

    raise SystemExit(impl.serve())
ev = Evaluator()

@ev.evaluate
def evaluate(request, result):
    return {"correct": True}

raise SystemExit(ev.serve())
"""


def _kill_marked(marker: str) -> None:
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
        except OSError:
            continue


def test_status_after_kill_9_says_interrupted_and_resume_continues(tmp_path: Path) -> None:
    marker = f"mw-sleeper-{os.getpid()}"
    script = tmp_path / f"{marker}.py"
    script.write_text(SLEEPER)
    write_manifest(
        tmp_path,
        f"""
[problems.answer]
evaluator = {{ runner = "python", entrypoint = "{script}", args = ["eval"] }}
result_schema = {{ type = "object", required = ["answer"] }}
metric_schema = {{ type = "object", required = ["correct"] }}

[implementations.slow]
runner = "python"
entrypoint = "{script}"
args = ["impl"]
problems = ["answer"]
"""
        + EXPERIMENT.format(impls='"slow"'),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "metewand", "run", "--run-id", "k", "--no-progress"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _worker_started(marker):
            time.sleep(0.1)
        assert _worker_started(marker), "the sleeping worker never started"
        running = metewand("status", "k", "--json", cwd=tmp_path)
        assert json.loads(running.stdout)["state"] == "running"  # its writer is alive
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        _kill_marked(marker)
        _remove_groups_of(proc.pid)  # a kill -9'd orchestrator cannot remove its workers' groups
    status = metewand("status", "k", "--json", cwd=tmp_path)
    data = json.loads(status.stdout)
    assert data["state"] == "interrupted" and data["recorded_state"] == "running", data
    assert "state     interrupted" in metewand("status", "k", cwd=tmp_path).stdout


def _remove_groups_of(pid: int) -> None:
    """The (emptied) accounting groups ``metewand-<label>-<pid>-<hex>`` the killed run made."""
    pattern = f"-{pid}-"
    deadline = time.monotonic() + 10
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        if top.count(os.sep) > 6:
            dirs[:] = []
            continue
        for name in [d for d in dirs if d.startswith("metewand-") and pattern in d]:
            dirs.remove(name)
            while True:
                try:
                    os.rmdir(os.path.join(top, name))
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.1)  # its last process is still exiting


def _worker_started(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if entry.name.isdigit() and marker.encode() in cmdline and b"impl" in cmdline:
            return True
    return False


WRONG = {
    **copy.deepcopy(ABOUT_BLANK_TASK),
    "task_id": "tiny_wrong",
    "grader": {"kind": "inline_assertions", "checks": [{"kind": "value_equals", "expected": 3}]},
}


@pytest.mark.engines
def test_browser_run_exits_0_with_failed_tasks_and_1_with_fail_on(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK, "b.json": WRONG})
    common = ("browser", "run", "--tasks", "corpus", "--engines", "chrome", "--no-progress")
    done = metewand(*common, "--run-id", "plain", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(r["status"] for r in rows_of(tmp_path / "runs/plain")) == ["fail", "pass"]
    assert "warning: 1 of 2 attempts did not pass: fail 1" in done.stderr
    assert (tmp_path / "runs/plain/scores.json").is_file()
    # the verdict is read from the rows: a run that writes no derived files exits the same
    strict = metewand(
        *common, "--run-id", "strict", "--fail-on", "fail,timeout", "--no-report", cwd=tmp_path
    )
    assert strict.returncode == 1 and "exit 1: attempts ended fail" in strict.stderr
    assert "derived files not written (--no-report)" in strict.stderr
    assert not (tmp_path / "runs/strict/scores.json").exists()
    lenient = metewand(
        *common, "--run-id", "lenient", "--fail-on", "timeout", "--no-report", cwd=tmp_path
    )
    assert lenient.returncode == 0, lenient.stderr
    bad = metewand(*common, "--run-id", "bad", "--fail-on", "failed", cwd=tmp_path)
    assert bad.returncode == 2 and not (tmp_path / "runs/bad").exists()
    assert corpus.is_dir()


def test_browser_run_exits_1_when_the_engine_crashes(tmp_path: Path) -> None:
    """Fault injection: /bin/false as the moli binary is found but exits before it is ready."""
    tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    done = metewand(
        "browser",
        "run",
        "--tasks",
        "corpus",
        "--engines",
        "moli",
        "--run-id",
        "c",
        "--no-progress",
        cwd=tmp_path,
        env={"METEWAND_MOLI_BIN": "/bin/false"},
    )
    assert done.returncode == 1, done.stderr
    assert [r["status"] for r in rows_of(tmp_path / "runs/c")] == ["crash"]
    assert "exit 1: attempts ended crash" in done.stderr
    _no_traceback(done)


@pytest.mark.engines
def test_a_harness_failure_exits_1_and_marks_the_run_interrupted_with_the_reason(
    tmp_path: Path,
) -> None:
    """Fault injection: an attempt observer that raises stands for a bug in the harness itself."""
    from metewand.runtime.store import RunView
    from metewand.suites.browser.attempt_registry import ATTEMPT_OBSERVERS, AttemptRegistry
    from metewand.suites.browser.observers.base import AttemptEnd, Observed, Observer
    from metewand.suites.browser.run_config import RunConfig
    from metewand.suites.browser.runner import HARNESS_ERROR_FILE, run_browser

    class Broken(Observer):
        async def stop(self) -> None:
            raise RuntimeError("injected harness fault")

        def end(self, ended: AttemptEnd) -> Observed:
            return Observed("broken")

    said: list[str] = []
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    config = RunConfig(str(corpus), ("chrome",))
    registry = AttemptRegistry(observers=(*ATTEMPT_OBSERVERS, lambda setup: Broken()))
    result = run_browser(config, tmp_path / "runs", "h", echo=said.append, registry=registry)
    assert result.exit_code == 1
    view = RunView(tmp_path / "runs" / "h")
    assert view.state == "interrupted"
    reason = "harness failed: RuntimeError: injected harness fault"
    assert view.manifest["data"]["interruption_reason"] == reason
    assert "injected harness fault" in (view.run_dir / HARNESS_ERROR_FILE).read_text()
    assert any(line.startswith(f"error: {reason}") for line in said), said
