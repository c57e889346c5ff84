"""Issue 27 items 1-3: an adapter's answer is credited only to the attempt it belongs to, and only
for what the task asked.

1. A served adapter that writes two result lines per payload once had attempt 2's row carry
   attempt 1's second line. Each payload now carries an ``attempt_id`` the result must echo; more
   output after the result is ``adapter_garbage`` and the adapter is restarted; output written
   between payloads restarts it before the next attempt, which then gets its own answer.
2. An adapter handed a server-graded task's ``checks[].expected`` could answer with it without
   loading the page and pass. Those values are withheld (the runner grades the checks from what
   the adapter saved); a pass whose fixture saw no request carries a note.
3. Check rows an adapter reports that the task does not declare are kept apart, labelled.

Real served adapter processes; for 2 and 3 a real ``browser run`` on Chromium with configured
adapters that cheat."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import REPO, configured_adapters, lexbench_or_skip, rows_of
from metewand.suites.browser.adapter_server import LongLivedAdapter
from metewand.suites.browser.adapters import AdapterCommand

# A served adapter that answers each payload as told by its task_id:
#   twice  - its result line, then a second one at once (the defect's trigger)
#   late   - its result line, then 0.5 s later another line, between payloads
#   wrong  - a result echoing another attempt's id
#   ok     - one proper result line
SERVED = """
    import json, os, sys, time
    for line in sys.stdin:
        payload = json.loads(line)
        what = payload["task_id"]
        def result(tag, echo=payload.get("attempt_id")):
            checks = [{{"name": "served", "status": "pass", "evidence": f"{{tag}}-{{what}}"}}]
            return json.dumps({{"ok": True, "answer": "1/1", "attempt_id": echo,
                               "observations": {{"checks": checks}}}}) + "\\n"
        if what.startswith("twice"):
            sys.stdout.write(result("first") + result("second"))
        elif what.startswith("late"):
            sys.stdout.write(result("first"))
            sys.stdout.flush()
            time.sleep(0.5)
            sys.stdout.write(result("late"))
        elif what.startswith("wrong"):
            sys.stdout.write(result("first", echo="someone-else"))
        else:
            sys.stdout.write(result("own"))
        sys.stdout.flush()
"""


def _payload(task_id: str, n: int) -> dict[str, Any]:
    return {"protocol": "abb_scenario_adapter/1", "task_id": task_id, "attempt_id": f"a{n}"}


def _attempts(tmp_path: Path, task_ids: list[str]) -> tuple[list[Any], int]:
    script = tmp_path / "served.py"
    script.write_text(textwrap.dedent(SERVED.format()))
    argv = (sys.executable, str(script))
    adapter = LongLivedAdapter(AdapterCommand(argv, serve_argv=argv), tmp_path / "served.log")

    async def go() -> list[Any]:
        runs = []
        try:
            for n, task_id in enumerate(task_ids):
                if task_id == "pause":  # time for a late line to arrive before the next payload
                    await asyncio.sleep(1.5)
                    continue
                runs.append(await adapter.run(_payload(task_id, n), 20.0, tmp_path / f"e{n}.log"))
            return runs
        finally:
            await adapter.close()

    return asyncio.run(go()), adapter.starts


def _evidence(run: Any) -> list[str]:
    return [str(c.get("evidence")) for c in run.checks]


@pytest.mark.timeout(60)
def test_a_second_result_line_is_garbage_never_the_next_attempts_answer(tmp_path: Path) -> None:
    runs, starts = _attempts(tmp_path, ["twice0", "twice1", "twice2"])
    for run in runs:
        assert run.outcome == "adapter_garbage", (run.outcome, run.detail)
        assert "more output after the result line" in run.detail
        assert run.result is None  # nothing of any attempt is credited
    assert starts == 3  # restarted after each


@pytest.mark.timeout(60)
def test_output_between_payloads_restarts_the_adapter_before_the_next_attempt(
    tmp_path: Path,
) -> None:
    sequence = ["late1", "pause", "ok2", "late3", "ok4", "wrong5", "ok6"]
    late, own, late_again, hit, wrong, after = _attempts(tmp_path, sequence)[0]
    # the late line had not arrived when the first result was read: that result is its own
    assert late.outcome == "result" and _evidence(late) == ["first-late1"]
    # it arrived before the next payload: the adapter was restarted, the answer is ok2's own
    assert own.outcome == "result" and _evidence(own) == ["own-ok2"]
    assert late_again.outcome == "result" and _evidence(late_again) == ["first-late3"]
    # no pause: the late line is what ok4 reads; it echoes late3's id, so it is no one's
    assert hit.outcome == "adapter_garbage" and "'a3'" in hit.detail and hit.result is None
    assert wrong.outcome == "adapter_garbage" and "someone-else" in wrong.detail
    assert after.outcome == "result" and _evidence(after) == ["own-ok6"]


KEY_SERVER, TASK_SERVER = "chromedp", "sc_nav_title_read__chromedp"  # server-graded
KEY_INLINE, TASK_INLINE = "playwright", "v3_pw_nav_back_forward"  # inline assertions
# An adapter that loads nothing: it answers with the expected values it was handed (as each
# check's saved value), claims every declared check passed, and reports a check of its own.
CHEAT = """#!{python}
import json, sys
payload = json.loads(sys.stdin.read())
with open(__file__ + ".payload.json", "w") as f:
    json.dump(payload, f)
rows = [{{"name": "driver_connect", "status": "pass", "evidence": "cheat"}}]
saved = {{}}
for check in payload["checks"]:
    rows.append({{"name": check.get("label") or check["kind"], "status": "pass", "evidence": "x"}})
    if "name" in check:
        saved[check["name"]] = check.get("expected")
rows.append({{"name": "bonus_speed", "status": "fail", "evidence": "not the task's"}})
print(json.dumps({{"ok": True, "answer": "all", "attempt_id": payload.get("attempt_id"),
                  "observations": {{"checks": rows, "saved": saved}}}}))
"""


@pytest.fixture(scope="module")
def cheated_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    corpus = lexbench_or_skip()
    tmp = tmp_path_factory.mktemp("cheat")
    env = configured_adapters(tmp, CHEAT, {KEY_SERVER: "x", KEY_INLINE: "x"})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metewand",
            "browser",
            "run",
            "--tasks",
            str(corpus),
            "--task",
            TASK_SERVER,
            "--task",
            TASK_INLINE,
            "--engines",
            "chrome",
            "--k",
            "1",
            "--out",
            str(tmp / "runs"),
            "--run-id",
            "c1",
            "--no-progress",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    return tmp / "runs" / "c1", tmp


def _row(run_dir: Path, task: str) -> dict[str, Any]:
    return next(r for r in rows_of(run_dir) if r["task_id"] == task)


@pytest.mark.timeout(360)
@pytest.mark.engines
def test_a_cheating_adapter_gets_no_answer_to_copy_and_its_extra_checks_are_apart(
    cheated_run: tuple[Path, Path],
) -> None:
    run_dir, tmp = cheated_run
    payload = json.loads((tmp / f"{KEY_SERVER}_adapter.py.payload.json").read_text())
    assert payload["checks"] and not any("expected" in c for c in payload["checks"])
    assert all(c.get("expected_withheld") for c in payload["checks"] if "name" in c)
    row = _row(run_dir, TASK_SERVER)
    assert row["status"] == "fail", row["reason"]
    graded = {c["name"]: c for c in row["checks"]}
    runner_graded = [c for c in graded.values() if "graded by the runner" in c["evidence"]]
    assert runner_graded and all(c["status"] == "fail" for c in runner_graded)
    # the same cheat on an inline task passes (its own assertions grade it), with a note; and
    # the check it added of its own is kept apart in both rows
    row = _row(run_dir, TASK_INLINE)  # inline: the expected values are the adapter's to check
    assert row["status"] == "pass"  # what it claimed, for a task graded by its own assertions
    assert row["traffic"]["fixture_request_count"] == 0
    assert row["pass_without_fixture_request"] is True
    for task in (TASK_INLINE, TASK_SERVER):
        row = _row(run_dir, task)
        assert "bonus_speed" not in {c["name"] for c in row["checks"]}
        assert [c["name"] for c in row["adapter_undeclared_checks"]] == ["bonus_speed"]
