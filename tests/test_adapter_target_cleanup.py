"""Pages a broken adapter left open in the engine are closed after its attempt (issue #15): a
configured adapter opens a page in the real Chromium and then hangs (or crashes); its row says
which page the harness closed, and the next attempt on the same engine finds none left. On a
real Lightpanda the cleanup runs too, and its record says only what the harness could see."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from browser_engine_fixtures import running_engine
from browser_run_helpers import REPO, configured_adapters, lexbench_or_skip, rows_of
from metewand.suites.browser.cdp import CdpClient

pytestmark = [pytest.mark.engines, pytest.mark.slow]

# Opens a page through the engine's HTTP endpoint (no CDP client needed), then misbehaves.
PAGE_LEAVING_ADAPTER = """#!{python}
import json, sys, time, urllib.parse, urllib.request
payload = json.load(sys.stdin)
port = payload["cdp_port"]
url = "about:blank#left-open-by-{mode}"
request = urllib.request.Request(f"http://127.0.0.1:{{port}}/json/new?{{urllib.parse.quote(url)}}", method="PUT")
urllib.request.urlopen(request, timeout=10).read()
if {mode!r} == "crash":
    sys.exit(3)
time.sleep(600)
"""
CASES = {
    "chromedp": ("sc_nav_title_read__chromedp", "hang", "timeout"),
    "rod": ("sc_nav_title_read__rod", "crash", "crash"),
}


def _broken_adapter_rows(tmp_path: Path, adapter: str, engine: str) -> list[dict[str, Any]]:
    """The rows of ``browser run`` on ``engine`` with each of CASES' paths configured to the
    ``adapter`` template in its mode, k=2 (one timeout and one crash row per attempt)."""
    corpus = lexbench_or_skip()
    modes = {key: mode for key, (_task, mode, _status) in CASES.items()}
    env = configured_adapters(tmp_path, adapter, modes)
    args = [a for task, _m, _s in CASES.values() for a in ("--task", task)]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metewand",
            "browser",
            "run",
            "--tasks",
            str(corpus),
            "--engines",
            engine,
            "--k",
            "2",
            "--out",
            str(tmp_path / "runs"),
            "--run-id",
            "left",
            "--timeout-scale",
            "0.1",
            "--no-progress",
            *args,
        ],  # the hang meets its deadline soon
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 1, done.stderr  # timeout and crash rows: exit 1
    rows = rows_of(tmp_path / "runs" / "left")
    assert len(rows) == 4
    return rows


def test_pages_left_by_a_hanging_or_crashing_adapter_are_closed_and_recorded(
    tmp_path: Path,
) -> None:
    rows = _broken_adapter_rows(tmp_path, PAGE_LEAVING_ADAPTER, "chrome")
    for row in rows:
        _task, mode, status = CASES[row["driver_path"]]
        assert row["status"] == status, row["reason"]
        cleanup = row["adapter_cleanup"]
        assert cleanup["errors"] == [], cleanup
        (page,) = cleanup["closed_pages"]  # the one page it opened, and nothing of the engine's
        assert page["url"] == f"about:blank#left-open-by-{mode}"
    # every attempt ran on the same engine process and found the same targets as the first:
    # the pages closed after each broken attempt did not pile up into the next
    assert len({r["engine_provenance"]["pid"] for r in rows}) == 1
    assert len({r["adapter_cleanup"]["targets_before"] for r in rows}) == 1


# The same misbehaviour through the adapter's own CDP connection (Lightpanda has no /json/new):
# a browser context and a page in it, then a crash, or a hang holding the connection open.
CDP_PAGE_LEAVING_ADAPTER = """#!{python}
import asyncio, json, os, sys, time
from metewand.suites.browser.cdp import CdpClient
payload = json.load(sys.stdin)
async def main():
    client = await CdpClient.connect(payload["browser_ws"])
    context = await client.send("Target.createBrowserContext", {{}})
    made = await client.send("Target.createTarget", {{"url": "about:blank#left-open-by-{mode}",
                             "browserContextId": context["browserContextId"]}})
    print("made page", made["targetId"], file=sys.stderr, flush=True)
    if {mode!r} == "crash":
        os._exit(3)
    time.sleep(600)
asyncio.run(main())
"""


async def _other_connections_pages_visible(ws_url: str) -> bool:
    """Whether a second CDP connection lists a page the first one opened (what the harness's
    cleanup connection needs to see an adapter's page; Lightpanda 1.0 scopes targets to their
    connection and drops them when it closes)."""
    async with await CdpClient.connect(ws_url) as opener:
        context = await opener.send("Target.createBrowserContext", {})
        made = await opener.send(
            "Target.createTarget",
            {"url": "about:blank", "browserContextId": context["browserContextId"]},
        )
        async with await CdpClient.connect(ws_url) as other:
            listed = await other.send("Target.getTargets", {})
    return any(t.get("targetId") == made["targetId"] for t in listed.get("targetInfos", []))


@pytest.mark.parametrize("engine", ["chrome", "lightpanda"])
def test_a_page_made_over_the_adapters_own_connection_gets_a_truthful_cleanup_record(
    engine: str, tmp_path: Path
) -> None:
    """Chrome lists every connection's targets, so the page and context are closed; Lightpanda
    1.0 does not, so the record names none (and its page went with the adapter's connection)."""
    lexbench_or_skip()
    with contextlib.contextmanager(running_engine)(engine, tmp_path / "probe") as process:
        assert process.ws_url is not None
        visible = asyncio.run(_other_connections_pages_visible(process.ws_url))
    rows = _broken_adapter_rows(tmp_path, CDP_PAGE_LEAVING_ADAPTER, engine)
    for row in rows:
        _task, mode, status = CASES[row["driver_path"]]
        assert row["status"] == status, row["reason"]
        if mode == "crash":  # its own exit, after it made the page (an exception exits 1)
            assert row["reason"].endswith("exit status 3"), row["reason"]
        (stderr,) = [a for a in row["artifacts"] if a.endswith("adapter_stderr.log")]
        assert "made page" in (tmp_path / "runs" / "left" / stderr).read_text()
        cleanup = row["adapter_cleanup"]
        assert cleanup["errors"] == [], cleanup  # listing and comparing worked on this engine
        if visible:  # the harness saw the adapter's page and context: exactly those went
            (page,) = cleanup["closed_pages"]
            assert page["url"].endswith(f"about:blank#left-open-by-{mode}")
            assert len(cleanup["disposed_contexts"]) == 1
        else:  # it could see neither, and says it closed nothing rather than claim it did
            assert cleanup["closed_pages"] == [] and cleanup["disposed_contexts"] == []
            assert cleanup["targets_before"] == 0
    assert len({r["engine_provenance"]["pid"] for r in rows}) == 1


# "clean": opens a page it never closes, yet says ok (a buggy adapter the harness cannot tell
# from a good one); "crash": opens its page, then exits 3.
OK_OR_CRASH_ADAPTER = """#!{python}
import json, sys, urllib.parse, urllib.request
payload = json.load(sys.stdin)
url = "about:blank#left-open-by-{mode}-" + str(payload["attempt"])
request = urllib.request.Request(
    f"http://127.0.0.1:{{payload['cdp_port']}}/json/new?{{urllib.parse.quote(url)}}", method="PUT"
)
urllib.request.urlopen(request, timeout=10).read()
if {mode!r} == "crash":
    sys.exit(3)
print(json.dumps({{"ok": True, "answer": "", "checks": []}}), flush=True)
"""
OK_OR_CRASH = {
    "chromedp": ("sc_nav_title_read__chromedp", "clean"),
    "rod": ("sc_nav_title_read__rod", "crash"),
}


def test_the_target_list_is_carried_over_clean_attempts_and_a_later_cleanup_closes_their_leftovers(
    tmp_path: Path,
) -> None:
    """After an adapter that said ok, the next attempt on the same engine is not preceded by a
    target listing (the phase is absent); a broken attempt's cleanup then compares with the list
    from before the clean ones (its age in attempts in the row), so it closes its own page and
    the pages the clean adapters left, and nothing of the engine's."""
    corpus = lexbench_or_skip()
    env = configured_adapters(
        tmp_path, OK_OR_CRASH_ADAPTER, {k: m for k, (_t, m) in OK_OR_CRASH.items()}
    )
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "browser", "run", "--tasks", str(corpus)]
        + [a for task, _m in OK_OR_CRASH.values() for a in ("--task", task)]
        + ["--engines", "chrome", "--k", "2", "--out", str(tmp_path / "runs"), "--run-id", "carry"]
        + ["--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 1, done.stderr  # the crash rows
    rows = sorted(rows_of(tmp_path / "runs" / "carry"), key=lambda r: r["started_at"])
    assert len(rows) == 4 and len({r["engine_provenance"]["pid"] for r in rows}) == 1
    left_by_clean: list[str] = []  # pages the clean adapters left since the list was taken
    carried = False  # whether the previous attempt carried its list to this one
    seen_aged = 0
    for row in rows:
        phases = [p["name"] for p in row["phases"]["harness"]["phases"]]
        assert ("target_snapshot" in phases) is not carried, (row["started_at"], phases)
        mode = OK_OR_CRASH[row["driver_path"]][1]
        mine = f"about:blank#left-open-by-{mode}-{row['attempt']}"
        if mode == "clean":
            assert row["adapter_cleanup"] is None
            left_by_clean = (left_by_clean if carried else []) + [mine]
            carried = True
            continue
        cleanup = row["adapter_cleanup"]
        assert cleanup["errors"] == [], cleanup
        expected = (left_by_clean if carried else []) + [mine]
        assert cleanup["snapshot_age_attempts"] == (len(left_by_clean) if carried else 0)
        assert sorted(p["url"] for p in cleanup["closed_pages"]) == sorted(expected)
        seen_aged += carried
        left_by_clean, carried = [], False
    assert seen_aged >= 1  # with two tasks per round, some crash always follows a clean attempt


def test_known_targets_are_asked_again_after_an_unclean_attempt_or_on_a_new_engine_process(
    tmp_path: Path,
) -> None:
    from metewand.suites.browser.adapter_targets import KnownTargets, TargetSnapshot

    async def exercise(ws_url: str) -> None:
        known = KnownTargets()
        assert not known.carries("chrome", ws_url)
        first, age = await known.before("chrome", ws_url)
        assert age == 0 and first.error is None and first.target_ids  # Chrome's own page
        known.after("chrome", ws_url, first, age, clean=True)
        assert known.carries("chrome", ws_url)
        again, age = await known.before("chrome", ws_url)
        assert again is first and age == 1
        known.after("chrome", ws_url, again, age, clean=False)  # a broken or failed ending
        assert not known.carries("chrome", ws_url)
        known.after("chrome", ws_url, first, 0, clean=True)
        elsewhere = "ws://127.0.0.1:1/devtools/browser/gone"  # another process of the engine
        assert not known.carries("chrome", elsewhere)
        fresh, age = await known.before("chrome", elsewhere)
        assert age == 0 and fresh.error is not None  # it asked that (unreachable) endpoint
        unreadable = TargetSnapshot(error="no answer")
        known.after("chrome", ws_url, unreadable, 0, clean=True)
        assert not known.carries("chrome", ws_url)  # an unread list is never carried

    lexbench_or_skip()
    with contextlib.contextmanager(running_engine)("chrome", tmp_path / "engine") as process:
        assert process.ws_url is not None
        asyncio.run(exercise(process.ws_url))
