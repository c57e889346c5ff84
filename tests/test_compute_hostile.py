"""Issue 12, compute side: hostile workers (named pipes, symlinks, daemons) neither hang the run
nor outlive it. Real workers (tests/workers/hostile_worker.py), real cgroups."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from compute_helpers import WORKERS, alive, run, write_manifest

HOSTILE = WORKERS / "hostile_worker.py"


def _worker(role: str, mode: str, pids: Path) -> str:
    env = f'{{ METEWAND_TEST_MODE = "{mode}", METEWAND_TEST_PIDS = "{pids}" }}'
    return f'runner = "python"\nentrypoint = "{HOSTILE}"\nargs = ["{role}"]\nenv = {env}\n'


def hostile_manifest(
    tmp_path: Path, impl: str = "ok", evaluator: str = "ok", gen: str | None = None
) -> Path:
    pids = tmp_path / "daemons.pids"
    evaluator_env = f'{{ METEWAND_TEST_MODE = "{evaluator}", METEWAND_TEST_PIDS = "{pids}" }}'
    dataset = ""
    datasets_line = ""
    if gen is not None:
        gen_env = f'{{ METEWAND_TEST_MODE = "{gen}", METEWAND_TEST_PIDS = "{pids}" }}'
        dataset = f"""
[datasets.made]
kind = "generated"
materializer = {{ runner = "python", entrypoint = "{HOSTILE}", args = ["gen"], env = {gen_env} }}
"""
        datasets_line = 'datasets = ["made"]\n'
    return write_manifest(
        tmp_path,
        dataset
        + f"""
[problems.answer]
evaluator = {{ runner = "python", entrypoint = "{HOSTILE}", args = ["eval"], env = {evaluator_env} }}

[implementations.subject]
{_worker("impl", impl, pids)}problems = ["answer"]

[execution_policies.short]
timeout = "20 s"

[[experiments]]
name = "hostile"
problem = "answer"
implementations = ["subject"]
execution_policy = "short"
{datasets_line}""",
    )


def daemons(tmp_path: Path) -> list[int]:
    record = tmp_path / "daemons.pids"
    return [int(p) for p in record.read_text().split()] if record.exists() else []


def only_row(tmp_path: Path, manifest: Path) -> dict:
    summary = run(manifest, tmp_path, host_sample_interval_s=None)
    assert len(summary.rows) == 1
    return summary.rows[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("impl", "evaluator", "code", "words"),
    [
        ("fifo_result", "ok", "invalid_result", "regular files"),
        ("symlink_result", "ok", "invalid_result", "symbolic links"),
        ("symlink_result_dir", "ok", "invalid_result", "symbolic links"),
        ("ok", "fifo_metrics", "evaluator_failure", "regular files"),
    ],
)
def test_worker_written_pipe_or_symlink_fails_the_attempt_at_once(
    tmp_path: Path, impl: str, evaluator: str, code: str, words: str
) -> None:
    started = time.monotonic()
    row = only_row(tmp_path, hostile_manifest(tmp_path, impl=impl, evaluator=evaluator))
    assert (row["status"], row["code"]) == ("failed", code), row["message"]
    assert words in row["message"]
    assert time.monotonic() - started < 15  # not the 20 s budget, not for ever


def leftover_groups(tag: str) -> list[str]:
    """Accounting groups in every hierarchy whose name carries ``tag``."""
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(root, d) for d in dirs if tag in d]
    return found


@pytest.mark.timeout(120)
def test_worker_exit_while_its_daemon_holds_the_pipe_is_seen_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    row = only_row(tmp_path, hostile_manifest(tmp_path, impl="daemon_exit"))
    elapsed = time.monotonic() - started
    assert row["status"] == "failed"
    assert row["code"] in ("protocol_error", "implementation_crash"), row["message"]
    assert "implementation execute" in row["message"]  # the phase it failed in, not prepare
    assert elapsed < 15, elapsed  # not after the whole 20 s budget
    assert daemons(tmp_path) and not any(alive(pid) for pid in daemons(tmp_path))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("who", ["evaluator", "materializer"])
def test_daemons_of_evaluator_and_materializer_die_with_the_run(tmp_path: Path, who: str) -> None:
    kwargs = {"evaluator": "daemon"} if who == "evaluator" else {"gen": "daemon"}
    row = only_row(tmp_path, hostile_manifest(tmp_path, **kwargs))
    assert row["status"] == "accepted", row["message"]
    pids = daemons(tmp_path)
    assert len(pids) == 1
    assert not alive(pids[0]), f"the {who}'s setsid daemon outlived the run"
    assert leftover_groups(f"mw-{os.getpid()}-") == []


@pytest.mark.timeout(120)
def test_build_that_leaves_a_background_sleep_does_not_stall_the_run(tmp_path: Path) -> None:
    marker = f"sleep 300.{uuid.uuid4().int % 10**9:09d}"  # a command line no one else runs
    manifest = hostile_manifest(tmp_path)
    text = manifest.read_text().replace(
        'problems = ["answer"]',
        f'build = ["sh", "-c", "{marker} & echo built"]\nproblems = ["answer"]',
    )
    manifest.write_text(text)
    started = time.monotonic()
    row = only_row(tmp_path, manifest)
    assert row["status"] == "accepted", row["message"]
    assert time.monotonic() - started < 20  # not the 300 s build timeout
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left == [], "the build's background sleep outlived the build"
    assert leftover_groups(f"mw-{os.getpid()}-") == []


@pytest.mark.timeout(120)
def test_an_evaluator_that_cannot_start_leaves_no_group(tmp_path: Path) -> None:
    manifest = hostile_manifest(tmp_path)
    text = manifest.read_text()
    start = text.index("evaluator = {")
    end = text.index("\n", start)
    manifest.write_text(
        text[:start]
        + 'evaluator = { runner = "command", program = "metewand-no-such-program" }'
        + text[end:]
    )
    row = only_row(tmp_path, manifest)
    assert (row["status"], row["code"]) == ("failed", "setup_failure"), row["message"]
    assert leftover_groups(f"mw-{os.getpid()}-") == []
    # The library path has no run record to sweep: the group must go with the session itself.
    from metewand.suites.compute.api import run_fixed_dataset_outcome

    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "private").mkdir()
    outcome = run_fixed_dataset_outcome(
        str(data),
        [sys.executable, str(HOSTILE), "impl"],
        ["metewand-no-such-program"],
        private_root=str(tmp_path / "private"),
    )
    assert getattr(outcome, "code", None) == "setup_failure"
    assert leftover_groups(f"mw-{os.getpid()}-") == []
