"""Pages a broken adapter left open in the engine are closed after its attempt (issue #15): a
configured adapter opens a page in the real Chromium and then hangs (or crashes); its row says
which page the harness closed, and the next attempt on the same engine finds none left."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from browser_run_helpers import REPO, configured_adapters, lexbench_or_skip, rows_of

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


def test_pages_left_by_a_hanging_or_crashing_adapter_are_closed_and_recorded(
    tmp_path: Path,
) -> None:
    corpus = lexbench_or_skip()
    modes = {key: mode for key, (_task, mode, _status) in CASES.items()}
    env = configured_adapters(tmp_path, PAGE_LEAVING_ADAPTER, modes)
    args = [a for task, _m, _s in CASES.values() for a in ("--task", task)]
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "browser", "run", "--tasks", str(corpus),
         "--engines", "chrome", "--k", "2", "--out", str(tmp_path / "runs"), "--run-id", "left",
         "--timeout-scale", "0.1", "--no-progress", *args],  # the hang meets its deadline soon
        capture_output=True, text=True, timeout=300, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # timeout and crash rows: exit 1
    rows = rows_of(tmp_path / "runs" / "left")
    assert len(rows) == 4
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
