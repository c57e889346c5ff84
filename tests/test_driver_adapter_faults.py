"""A misbehaving adapter gives exactly one classified outcome and leaves no process behind:
real adapter processes (small Python programs) that crash, hang through TERM, print garbage,
report a harness error, or leave a grandchild in another session."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time
from pathlib import Path

from metewand.suites.browser.adapters import AdapterCommand, AdapterRun, parse_result, run_adapter

PAYLOAD = {"protocol": "abb_scenario_adapter/1", "steps": [], "checks": []}


def adapter(tmp_path: Path, body: str) -> AdapterCommand:
    """A Python adapter that records its pid (and any child's) in pids.txt before misbehaving."""
    script = tmp_path / "adapter.py"
    prologue = f"""
        import json, os, signal, subprocess, sys, time
        PIDS = {str(tmp_path / "pids.txt")!r}
        def note(pid):
            with open(PIDS, "a") as f:
                f.write(f"{{pid}}\\n")
        note(os.getpid())
        sys.stdin.read()
    """
    script.write_text(textwrap.dedent(prologue) + textwrap.dedent(body))
    return AdapterCommand((sys.executable, str(script)))


def run(tmp_path: Path, command: AdapterCommand, deadline_s: float = 20.0) -> AdapterRun:
    return asyncio.run(run_adapter(command, PAYLOAD, deadline_s, tmp_path / "stderr.txt"))


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return not stat[stat.rfind(")") + 2 :].startswith("Z")


def assert_nothing_left(tmp_path: Path) -> None:
    pids = [int(line) for line in (tmp_path / "pids.txt").read_text().split()]
    assert pids, "the adapter never started"
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in pids if alive(p)] == []


def test_a_crashing_adapter_is_one_crash_row(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        adapter(
            tmp_path,
            "print('partial', file=sys.stderr)\nsys.stdout.write('{\"ok\": tr')\nsys.exit(3)\n",
        ),
    )
    assert result.outcome == "adapter_crash"
    assert result.exit_code == 3 and result.exit_signal is None
    assert "partial" in result.stderr_tail
    classification = result.classification()
    assert (classification.status, classification.failure_class, classification.origin) == (
        "crash",
        "infra",
        "adapter",
    )
    assert "exit status 3" in classification.reason
    assert_nothing_left(tmp_path)


def test_an_adapter_killed_by_a_signal_is_a_crash(tmp_path: Path) -> None:
    result = run(tmp_path, adapter(tmp_path, "os.kill(os.getpid(), signal.SIGSEGV)\n"))
    assert result.outcome == "adapter_crash" and result.exit_signal == 11
    assert_nothing_left(tmp_path)


def test_a_hanging_adapter_that_ignores_term_is_killed_and_is_one_timeout_row(
    tmp_path: Path,
) -> None:
    body = "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    time.sleep(1)\n"
    started = time.monotonic()
    result = run(tmp_path, adapter(tmp_path, body), deadline_s=1.0)
    elapsed = time.monotonic() - started
    assert result.outcome == "adapter_hang"
    assert result.exit_signal == 9  # TERM was ignored, KILL ended it
    assert 1.0 <= elapsed < 10.0
    classification = result.classification()
    assert (classification.status, classification.origin) == ("timeout", "adapter")
    assert_nothing_left(tmp_path)


def test_garbage_on_stdout_is_one_infra_row(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        adapter(tmp_path, "print('connected to the browser')\nprint(json.dumps({'ok': True}))\n"),
    )
    assert result.outcome == "adapter_garbage"
    assert "not one JSON object" in result.detail and "connected to the browser" in result.detail
    classification = result.classification()
    assert (classification.status, classification.failure_class, classification.origin) == (
        "infra",
        "infra",
        "adapter",
    )
    assert_nothing_left(tmp_path)


def test_a_harness_error_result_is_infra_never_an_engine_result(tmp_path: Path) -> None:
    body = "print(json.dumps({'ok': False, 'error': {'class': 'script_error', 'message': 'binding gate: product differs'}}))\n"
    result = run(tmp_path, adapter(tmp_path, body))
    assert result.outcome == "adapter_error"
    classification = result.classification()
    assert classification.status == "infra" and "binding gate" in classification.reason


def test_a_grandchild_in_another_session_is_killed_and_named(tmp_path: Path) -> None:
    """The adapter exits cleanly but leaves a daemon outside its process group: the accounting
    group still finds it, kills it, and the run names it."""
    body = """
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        note(child.pid)
        print(json.dumps({"ok": True, "answer": "1/1 checks",
                          "observations": {"checks": [{"name": "driver_connect", "status": "pass"}]}}))
    """
    result = run(tmp_path, adapter(tmp_path, body))
    assert result.outcome == "result"
    assert result.classification().status == "pass"
    if result.accounting_backend is None:  # no cgroup here: the process group alone cannot see it
        return
    pids = [int(line) for line in (tmp_path / "pids.txt").read_text().split()]
    assert pids[1] in result.leftover_pids
    assert_nothing_left(tmp_path)


def test_a_result_with_a_failed_check_is_an_engine_fail_with_its_class() -> None:
    outcome, result, _ = parse_result(
        b'{"ok": true, "observations": {"checks": [{"name": "a", "status": "pass"}, '
        b'{"name": "b", "status": "fail"}], "failure_class": "cdp_semantic"}}\n'
    )
    run = AdapterRun(outcome, "", result, 0, None, 1, "", [])
    classification = run.classification()
    assert (classification.status, classification.failure_class) == ("fail", "cdp_semantic")
    assert classification.reason == "checks failed: b"


def test_an_adapter_that_exits_before_reading_its_payload_is_classified(tmp_path: Path) -> None:
    script = tmp_path / "early.py"
    script.write_text("import os\nos.close(0)\nraise SystemExit(5)\n")
    result = asyncio.run(
        run_adapter(
            AdapterCommand((sys.executable, str(script))),
            {"x": "y" * 1_000_000},
            20.0,
            tmp_path / "e.txt",
        )
    )
    assert result.outcome == "adapter_crash" and result.exit_code == 5


def test_the_adapter_accounting_group_is_removed_after_the_run(tmp_path: Path) -> None:
    body = """
        with open(PIDS + ".cgroup", "w") as f:
            f.write(open("/proc/self/cgroup").read())
        print(json.dumps({"ok": False, "error": {"class": "script_error", "message": "x"}}))
    """
    result = run(tmp_path, adapter(tmp_path, body))
    if result.accounting_backend is None:
        return
    own = [line.split(":", 2) for line in (tmp_path / "pids.txt.cgroup").read_text().splitlines()]
    paths = [path for _, controllers, path in own if "adapter" in path]
    assert paths, own  # the adapter ran inside its own group
    roots = [
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/cpuacct",
        "/sys/fs/cgroup/cpu,cpuacct",
    ]
    for path in paths:
        assert not any(os.path.isdir(root + path) for root in roots), path
