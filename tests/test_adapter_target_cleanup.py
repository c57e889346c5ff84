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
