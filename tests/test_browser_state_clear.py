"""The harness clears the engine's state after a driver-path attempt whose pages were in the
engine's default context (``suites/browser/state_clear.py``), on real engines through real
adapters: a task reads the cookie and the localStorage item the attempt before it set on the
fixture origin, then sets its own.

- ``shared``: the second attempt of each path finds what the first set, and nothing is cleared;
- ``cleared`` (the default): nothing reaches any later attempt, each row says ``cleared`` and
  how;
- ``context``: chrome-remote-interface isolates with a context of its own and is
  not cleared; Selenium, which can open tabs only in the default context, is cleared after.

Both paths run in one run, attempts interleaved: in ``shared`` the Selenium attempt also finds
what the chrome-remote-interface attempt before it set (the same origin), so a clear that missed
any one attempt shows.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from browser_engine_fixtures import resolved_or_skip, running_engine
from browser_run_helpers import cli, driver_corpus, driver_task, rows_of
from metewand.suites.browser import state_clear
from metewand.suites.browser.cdp import CdpClient
from metewand.suites.browser.driver_registry import DriverMissing, resolve_driver

PATHS = {  # driver path -> (the task's driver kind, subset)
    "chrome_remote_interface": ("thin_chrome_remote_interface", "l1.chrome_remote_interface"),
    "selenium": ("webdriver_selenium", "l1.selenium"),
}
READ_AND_SET = (
    "(() => { const had = document.cookie + '|' + localStorage.getItem('mw_iso');"
    " document.cookie = 'mw_iso=1; path=/'; localStorage.setItem('mw_iso', 'v'); return had; })()"
)
NOTHING = "|null"  # no cookie, no item


def _task(key: str) -> dict[str, Any]:
    return driver_task(
        f"iso_{key}",
        PATHS[key],
        [
            {"op": "new_page"},
            {"op": "goto", "url": "{fixture_url}"},
            {"op": "evaluate", "expression": READ_AND_SET, "save_as": "had"},
        ],
        [{"kind": "step_ok", "label": "read", "step": 2}],
        "Reads the fixture origin's cookie and localStorage item, then sets both.",
        {"kind": "self_hosted_fixture", "url": "/mw-iso"},
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for key in PATHS:
        if isinstance(found := resolve_driver(key), DriverMissing):
            pytest.skip(f"{key}: {found.detail}")
    root = tmp_path_factory.mktemp("iso") / "corpus"
    driver_corpus(root, {f"iso_{key}": _task(key) for key in PATHS})
    (root / "fixtures" / "pages").mkdir()
    (root / "fixtures" / "pages" / "iso.html").write_text("<!doctype html><title>iso</title>")
    (root / "fixtures" / "routes.json").write_text(json.dumps({"/mw-iso": "pages/iso.html"}))
    return root


def _run(corpus: Path, out: Path, engine: str, isolation: str) -> list[dict[str, Any]]:
    """Two attempts of each path's task, per attempt, in run order, each with what it found."""
    # cleared is the default: asked for by leaving the option out
    asked = [] if isolation == "cleared" else ["--driver-isolation", isolation]
    options = f"--engines {engine} --k 2 --adapter-mode per-attempt --jobs 1 --no-progress"
    where = ["--tasks", str(corpus), "--out", str(out), "--run-id", isolation]
    done = cli("browser", "run", *options.split(), *asked, *where, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = out / isolation
    rows = sorted(rows_of(run_dir), key=lambda row: str(row["started_at"]))
    for row in rows:
        assert row["status"] == "pass", (row["task_id"], row["reason"])
        result = json.loads((run_dir / row["artifact_dir"] / "adapter_result.json").read_text())
        row["had"] = result["observations"]["saved"]["had"]
    assert len(rows) == 4
    return rows


@pytest.mark.engines
@pytest.mark.slow
def test_shared_pages_pass_state_on_and_nothing_is_cleared(corpus: Path, tmp_path: Path) -> None:
    rows = _run(corpus, tmp_path, "chrome", "shared")
    assert rows[0]["had"] == NOTHING
    assert all(row["had"] == "mw_iso=1|v" for row in rows[1:]), [r["had"] for r in rows]
    assert all(row["isolation"] == "shared" and row["state_clear"] is None for row in rows)


@pytest.mark.engines
@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["cleared", "context"])
def test_no_state_reaches_the_next_attempt_unless_shared_was_asked(
    corpus: Path, tmp_path: Path, isolation: str
) -> None:
    rows = _run(corpus, tmp_path, "chrome", isolation)
    assert [row["had"] for row in rows] == [NOTHING] * 4
    for row in rows:
        assert row["driver_isolation_asked"] == isolation
        if isolation == "context" and row["driver_path"] == "chrome_remote_interface":
            assert row["isolation"] == "context" and row["state_clear"] is None
            continue
        assert row["isolation"] == "cleared", row["driver_path"]
        clear = row["state_clear"]
        assert clear["by"] == "harness" and clear["errors"] == [], clear
        assert clear["cookies"] == "all" and "local_storage" in clear["storage_types"]
        port = clear["origins"][0].rpartition(":")[2]
        assert clear["origins"] == [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
        assert clear["wall_ms"] > 0
        assert "state_clear" in [phase["name"] for phase in row["phases"]["engine"]["phases"]]
    # the slot's connection to Chrome is opened by the first clear and kept for the others
    connections = [row["state_clear"]["connection"] for row in rows if row["state_clear"]]
    assert connections[0] == "opened" and set(connections[1:]) == {"kept"}, connections


@pytest.mark.engines
def test_an_engine_whose_state_is_per_connection_is_not_cleared(
    corpus: Path, tmp_path: Path
) -> None:
    """Lightpanda starts each CDP connection empty: the row says so, and the second attempt
    indeed finds nothing (Selenium cannot attach to Lightpanda: chrome-remote-interface only)."""
    resolved_or_skip("lightpanda")
    options = "--engines lightpanda --k 2 --adapter-mode long-lived --driver-isolation cleared"
    where = ["--tasks", str(corpus), "--out", str(tmp_path), "--run-id", "lp", "--no-progress"]
    done = cli("browser", "run", *options.split(), "--task", "iso_chrome_remote_interface", *where)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "lp")
    assert len(rows) == 2
    for row in rows:
        artifacts = tmp_path / "lp" / row["artifact_dir"]
        result = json.loads((artifacts / "adapter_result.json").read_text())
        assert result["observations"]["saved"]["had"] == NOTHING
        assert row["isolation"] == "shared"
        assert row["state_clear"]["by"] == "engine", row["state_clear"]
        assert "each CDP connection" in row["state_clear"]["note"]


async def _clears_around_closing_every_page(ws_url: str) -> list[state_clear.StateClear]:
    kept = state_clear.KeptClears()
    origins = ("http://127.0.0.1:9",)
    try:
        first = await kept.clear(ws_url, origins)
        async with await CdpClient.connect(ws_url) as client:
            found = await client.send("Target.getTargets", {})
            for info in found["targetInfos"]:
                if info["type"] == "page":
                    await client.send("Target.closeTarget", {"targetId": info["targetId"]})
        return [first, await kept.clear(ws_url, origins), await kept.clear(ws_url, origins)]
    finally:
        await kept.close()


@pytest.mark.engines
def test_a_kept_clear_whose_page_has_gone_clears_through_another(tmp_path: Path) -> None:
    """The page a kept session was attached to is closed (here: every page of the engine):
    the next clear attaches again (Chrome would leave a command on the old session unanswered),
    and still clears everything."""
    for engine in running_engine("chrome", tmp_path):
        assert engine.ws_url is not None
        first, second, third = asyncio.run(_clears_around_closing_every_page(engine.ws_url))
        assert first.cleared and first.connection == "opened" and not first.made_page
        for later in (second, third):  # the kept connection, a page found (or made) again
            assert later.cleared and later.connection == "kept", later.errors
            # at most one kept command's short wait, not a clear's 10 s timeout
            assert later.wall_ms is not None and later.wall_ms < 5000


def test_a_clear_the_engine_cannot_answer_says_why() -> None:
    """An endpoint nobody listens on: the record carries the error and does not count as
    cleared (the row's isolation then stays the adapter's)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    record = asyncio.run(
        state_clear.clear_state(f"ws://127.0.0.1:{port}/devtools/browser/x", ("http://a:1",))
    )
    assert not record.cleared
    assert record.errors and "cannot connect" in record.errors[0], record.errors
    assert record.to_json()["errors"] == record.errors


def test_the_fixture_origin_is_cleared_under_both_loopback_names() -> None:
    assert state_clear.fixture_origins("http://127.0.0.1:8123/l1/core") == (
        "http://127.0.0.1:8123",
        "http://localhost:8123",
    )
    assert state_clear.fixture_origins("http://example.test:80/x") == ("http://example.test:80",)
