"""The long-lived adapter mode: one served adapter process answers several attempts, and an
attempt that crashes it, hangs past its own deadline or answers garbage is charged alone (the
process tree is killed, the next attempt gets a fresh adapter). Real processes throughout: a small
served Python adapter for the faults, the shipped adapters against a real Chromium for the rest."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from driver_helpers import Bench, chrome_bench, found_or_skip, run_served_task
from metewand.suites.browser.adapter_server import LongLivedAdapter, open_adapter
from metewand.suites.browser.adapters import AdapterCommand

SERVED = """
    import json, os, subprocess, sys, time
    PIDS = {pids!r}
    def note(pid):
        with open(PIDS, "a") as f:
            f.write(f"{{pid}}\\n")
    note(os.getpid())
    for line in sys.stdin:
        payload = json.loads(line)
        what = payload["task_id"]
        print(f"attempt {{what}} in {{os.getpid()}}", file=sys.stderr, flush=True)
        if what == "crash":
            os._exit(3)
        if what == "hang":
            child = subprocess.Popen(["sleep", "600"], start_new_session=True)
            note(child.pid)
            time.sleep(600)
        if what == "garbage":
            print("this is not json", flush=True)
            continue
        result = {{"ok": True, "answer": "1/1", "attempt_id": payload["attempt_id"], "observations": {{"checks": [
            {{"name": "served_by", "status": "pass", "evidence": str(os.getpid())}}]}}}}
        print(json.dumps(result), flush=True)
"""


def served_adapter(tmp_path: Path) -> AdapterCommand:
    script = tmp_path / "served.py"
    script.write_text(textwrap.dedent(SERVED.format(pids=str(tmp_path / "pids.txt"))))
    argv = (sys.executable, str(script))
    return AdapterCommand(argv, serve_argv=argv)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return not stat[stat.rfind(")") + 2 :].startswith("Z")


def test_a_broken_attempt_is_charged_alone_and_the_next_gets_a_fresh_adapter(
    tmp_path: Path,
) -> None:
    async def scenario() -> list[tuple[str, str, str, int]]:
        runner = LongLivedAdapter(served_adapter(tmp_path), tmp_path / "served.log")
        seen = []
        try:
            for n, task in enumerate(["ok", "ok", "crash", "ok", "hang", "ok", "garbage", "ok"]):
                payload = {"protocol": "abb_scenario_adapter/1", "task_id": task}
                stderr = tmp_path / f"{n}-{task}.stderr"
                deadline = 2.0 if task == "hang" else 20.0
                run = await runner.run(payload, deadline, stderr)
                served_by = run.checks[0]["evidence"] if run.checks else "-"
                if task == "crash":
                    assert run.exit_code == 3 and run.detail.endswith("with exit status 3")
                seen.append((task, run.outcome, run.classification().status, runner.starts))
                assert f"attempt {task}" in stderr.read_text()  # its own share of stderr
                if task == "ok":
                    assert served_by != "-"
        finally:
            await runner.close()
        return seen

    seen = asyncio.run(scenario())
    assert seen == [
        ("ok", "result", "pass", 1),
        ("ok", "result", "pass", 1),  # the same process answered again
        ("crash", "adapter_crash", "crash", 1),
        ("ok", "result", "pass", 2),  # restarted for the next attempt only
        ("hang", "adapter_hang", "timeout", 2),
        ("ok", "result", "pass", 3),
        ("garbage", "adapter_garbage", "infra", 3),
        ("ok", "result", "pass", 4),
    ]
    pids = [int(p) for p in (tmp_path / "pids.txt").read_text().split()]
    assert len(pids) == 5  # four adapter processes and the hang's grandchild in its own session
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in pids if alive(p)] == []


def test_modes_are_selected_by_name_and_an_adapter_without_a_serve_mode_is_refused(
    tmp_path: Path,
) -> None:
    one_shot = AdapterCommand((sys.executable, "-c", "pass"))
    assert type(open_adapter(one_shot)).__name__ == "PerAttemptAdapter"
    with pytest.raises(ValueError, match="no long-lived"):
        open_adapter(one_shot, "long_lived", log_path=tmp_path / "log")
    with pytest.raises(ValueError, match="unknown adapter mode"):
        open_adapter(one_shot, "pooled")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from chrome_bench(tmp_path_factory.mktemp("engine-logs"))


SERVED_CASES = {
    "playwright": (
        "L1/playwright",
        ["sc_app_add_single_item__pw", "sc_form_fill_overwrites__pw", "sc_app_add_single_item__pw"],
    ),
    "cdp_use": (
        "L1/cdp_use",
        [
            "sc_nav_back_restores__cdpu",
            "sc_form_checkbox_check__cdpu",
            "sc_nav_back_restores__cdpu",
        ],
    ),
}


@pytest.mark.engines
@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(SERVED_CASES))
def test_a_served_shipped_adapter_passes_attempt_after_attempt_with_its_own_page(
    key: str, bench: Bench, tmp_path: Path
) -> None:
    """Several attempts in one adapter process, a task repeated among them; each attempt
    connects and opens its own page, so each passes as it does in a fresh process."""
    found = found_or_skip(key)
    subset, task_ids = SERVED_CASES[key]

    async def attempts() -> list[tuple[str, str, int | None]]:
        runner = open_adapter(found.command, "long_lived", log_path=tmp_path / "served.log")
        out = []
        try:
            for n, task_id in enumerate(task_ids):
                run, status = await run_served_task(
                    runner, bench, key, subset, task_id, tmp_path, n + 1, 35.0
                )
                cpu = run.cpu_ns.value if run.cpu_ns is not None else None
                out.append((run.outcome, status, cpu))
            assert isinstance(runner, LongLivedAdapter) and runner.starts == 1
        finally:
            await runner.close()
        return out

    results = asyncio.run(attempts())
    assert [(o, s) for o, s, _ in results] == [("result", "pass")] * len(task_ids), results
    if results[0][2] is not None:  # an accounting group: each attempt's own CPU, not the total
        assert all(cpu is not None and cpu > 0 for _, _, cpu in results)
    assert bench.engine.is_alive()
