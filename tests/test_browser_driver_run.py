"""``metewand browser run`` over driver-path tasks (issue #15), end to end: a real Chromium and a
real Lightpanda, the real fixture server on the peer corpus, each shipped adapter through its
real client library, rows graded by the adapter's check rows and the server-side grader."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import REPO, alive, cli, configured_adapters, lexbench_or_skip, rows_of
from metewand.runtime import schemas
from metewand.suites.browser.driver_registry import DRIVER_PATHS, DriverMissing, resolve_driver
from peer_layouts import assert_peer_layouts

pytestmark = [pytest.mark.engines, pytest.mark.slow]

# Two tasks of every shipped driver path (navigation + reading, clicks into an app), one L2 flow.
SHIPPED_TASKS = {
    "playwright": ["sc_nav_title_read__pw", "sc_app_add_single_item__pw"],
    "puppeteer": ["sc_nav_title_read__pp", "sc_app_add_single_item__pp", "v3_pp_flow_shop_cart"],
    "chrome_remote_interface": ["sc_nav_title_read__cri", "sc_app_add_single_item__cri"],
    "chrome_devtools_mcp": ["sc_nav_title_read__mcp", "sc_app_add_single_item__mcp"],
    "cdp_use": ["sc_nav_title_read__cdpu", "sc_nav_back_restores__cdpu"],
    "pydoll": ["sc_app_add_single_item__pyd", "sc_nav_back_restores__pyd"],
    "selenium": ["sc_nav_title_read__se", "sc_app_add_single_item__se"],
}
# The Go, Rust and Ruby paths: no adapter can be installed here.
FOREIGN_TASKS = {
    "chromedp": ("sc_nav_title_read__chromedp", "go"),
    "rod": ("sc_nav_title_read__rod", "go"),
    "chromiumoxide": ("sc_nav_back_restores__oxide", "cargo"),
    "ferrum": ("sc_nav_title_read__fr", "ruby"),
}
ENGINES = ("chrome", "lightpanda")


def _installed() -> dict[str, list[str]]:
    return {
        key: tasks
        for key, tasks in SHIPPED_TASKS.items()
        if not isinstance(resolve_driver(key), DriverMissing)
    }


@pytest.fixture(scope="module")
def driver_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    corpus = lexbench_or_skip()
    out = tmp_path_factory.mktemp("driver-run")
    tasks = [t for ts in _installed().values() for t in ts]
    tasks += [task for task, _ in FOREIGN_TASKS.values()]
    args = [a for t in tasks for a in ("--task", t)]
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        ",".join(ENGINES),
        "--k",
        "1",
        "--out",
        str(out),
        "--run-id",
        "drivers",
        "--no-progress",
        *args,
        timeout=900,
    )
    # exit 0: no attempt ended infra or crash (exit 1 would say one did)
    assert done.returncode == 0, done.stderr[-3000:]
    yield out / "drivers"


def _rows(run: Path, key: str, engine: str) -> list[dict[str, Any]]:
    return [r for r in rows_of(run) if r["driver_path"] == key and r["engine"] == engine]


@pytest.mark.parametrize("key", sorted(SHIPPED_TASKS))
def test_each_installed_driver_path_passes_its_tasks_on_chrome(driver_run: Path, key: str) -> None:
    found = resolve_driver(key)
    if isinstance(found, DriverMissing):
        pytest.skip(f"{key}: {found.detail}")
    rows = _rows(driver_run, key, "chrome")
    assert sorted(r["task_id"] for r in rows) == sorted(SHIPPED_TASKS[key])
    for row in rows:
        assert row["status"] == "pass", (row["task_id"], row["reason"])
        assert row["driver"] == DRIVER_PATHS[key].task_kind  # the peer's field, unchanged
        assert row["driver_version"] == DRIVER_PATHS[key].version
        assert row["adapter"]["outcome"] == "result" and row["adapter"]["leftover_pids"] == []
        # the adapter tree's own cost, measured in its accounting group (harness scope)
        cost = row["driver_resources"]
        assert cost["scope"] == "harness_scope" and cost["unavailable"] == {}, cost
        assert cost["cpu_total_ms"] > 0 and cost["peak_memory_bytes"] > 1_000_000, cost
        # graded by the adapter's check rows and by the fixture server's grader
        kinds = {c["kind"] for c in row["checks"]}
        assert kinds == {"driver", "server_side"}, row["checks"]
        assert row["cdp"]["wait_ms"] is None  # the harness held no CDP connection: not 0
        # the default --driver-isolation, cleared: each adapter opened its pages in the default
        # context and the harness cleared it after; chrome-devtools-mcp opens an isolated
        # context whatever is asked, and is not cleared
        assert row["driver_isolation_asked"] == "cleared"
        if key == "chrome_devtools_mcp":
            assert row["isolation"] == "context" and row["state_clear"] is None, row["isolation"]
        else:
            assert row["isolation"] == "cleared", row["isolation"]
            assert row["state_clear"]["by"] == "harness" and not row["state_clear"]["errors"]


def test_lightpanda_runs_every_installed_path_with_no_infra_row(driver_run: Path) -> None:
    rows = [r for r in rows_of(driver_run) if r["engine"] == "lightpanda"]
    shipped = [r for r in rows if r["driver_path"] in _installed()]
    assert len(shipped) == sum(len(t) for t in _installed().values())
    for row in shipped:
        assert row["status"] not in ("infra", "crash"), (row["task_id"], row["reason"])
        assert row["adapter"]["outcome"] == "result", (row["task_id"], row["adapter"])


@pytest.mark.parametrize("engine", ENGINES)
def test_go_rust_ruby_paths_are_unsupported_with_the_missing_toolchain(
    driver_run: Path, engine: str
) -> None:
    for key, (task_id, toolchain) in FOREIGN_TASKS.items():
        (row,) = _rows(driver_run, key, engine)
        assert row["task_id"] == task_id
        assert (row["status"], row["failure_class"], row["origin"]) == (
            "unsupported",
            "driver_unavailable",
            "driver_registry",
        )
        assert row["reason"].startswith(f"driver_unavailable: {key}: ")
        assert f"({toolchain} toolchain" in row["reason"]
        assert row["failure"]["class"] == "driver_unavailable"
        assert row["adapter"] is None and row["driver_version"] is None
        assert row["driver_resources"]["unavailable"] == {
            "cpu": "driver_unavailable",
            "memory": "driver_unavailable",
        }
        assert row["driver_resources"]["cpu_total_ms"] is None  # not measured, never 0


def test_the_report_shows_pass_rate_and_driver_cost_per_driver_path(driver_run: Path) -> None:
    done = cli("report", str(driver_run))
    assert done.returncode == 0, done.stderr
    scores = json.loads((driver_run / "scores.json").read_text())
    table = scores["by_driver_engine"]
    for key in _installed():
        block = table[key]["chrome"]
        assert block["attempts"]["passed"] == block["attempts"]["total"] > 0
        assert block["driver_cost"]["driver_cpu_ms"]["n"] == block["attempts"]["total"]
        assert block["driver_cost"]["driver_cpu_ms"]["median"] > 0
        # a functional run measured no engine cost: said, not 0
        assert block["engine_cost"]["engine_cpu_ms"]["median"] is None
        assert block["unavailable"]["engine_cpu_ms"] == "run not profiled"
    for key in FOREIGN_TASKS:
        assert table[key]["lightpanda"]["attempts"]["by_status"] == {"unsupported": 1}
    card = (driver_run / "scorecard.md").read_text()
    section = card.split("## Per driver path", 1)[1]
    for key in [*_installed(), *FOREIGN_TASKS]:
        assert f"| {key} | chrome |" in section and f"| {key} | lightpanda |" in section
    assert "Per driver path" in (driver_run / "report.html").read_text()


def test_a_run_of_other_subsets_plans_no_driver_path(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--subset",
        "l1.raw_cdp",
        "--task",
        "pw_raw_accessibility_getfullaxtree",
        "--engines",
        "chrome",
        "--out",
        str(tmp_path),
        "--run-id",
        "raw",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    (row,) = rows_of(tmp_path / "raw")
    assert row["status"] == "pass" and row["driver_path"] == "raw_cdp"
    assert "adapter" not in row and "driver_resources" not in row
    assert row["cdp"]["commands"] > 0 and row["cdp"]["wait_ms"] is not None


# ---- adapters that misbehave, configured in place of the Go/Rust/Ruby paths ----

FAKE_ADAPTER = """#!{python}
import json, os, sys
payload = json.load(sys.stdin)
mode = {mode!r}
checks = [{{"name": c.get("label") or c["kind"], "status": "pass", "evidence": "claimed"}}
          for c in payload["checks"]]
if mode == "crash":
    sys.exit(3)
if mode == "garbage":
    print("not json at all")
elif mode == "lazy":  # claims every check, never drove the page
    print(json.dumps({{"ok": True, "answer": "x", "observations": {{"checks": checks,
                      "saved": {{"answer": "made up"}}}}}}))
elif mode == "drops_checks":
    print(json.dumps({{"ok": True, "answer": "x", "observations": {{"checks": checks[:1]}}}}))
elif mode == "engine_gap":  # the contract's harness error naming an engine gap
    print(json.dumps({{"ok": False, "error": {{"class": "engine_unsupported",
                                              "message": "no such domain"}}}}))
elif mode == "hang":  # and a grandchild that left its session: the sweep must still find it
    import subprocess, time
    subprocess.Popen(["sleep", "600"], start_new_session=True)
    time.sleep(600)
"""
FAULTS = {
    "chromedp": ("sc_nav_title_read__chromedp", "crash", ("crash", "infra", "adapter")),
    "rod": ("sc_nav_title_read__rod", "garbage", ("infra", "infra", "adapter")),
    "chromiumoxide": (
        "sc_nav_back_restores__oxide",
        "lazy",
        ("fail", "cdp_semantic", "engine_process"),
    ),
    "ferrum": ("sc_nav_title_read__fr", "drops_checks", ("infra", "script_error", "adapter")),
    "agent_browser": (
        "sc_nav_title_read__ab",
        "engine_gap",
        ("unsupported", "engine_unsupported", "adapter"),
    ),
    "stagehand": ("sc_app_add_single_item__sh", "hang", ("timeout", "infra", "adapter")),
}


def test_configured_adapters_that_crash_lie_or_write_garbage_get_classified_rows(
    tmp_path: Path,
) -> None:
    corpus = lexbench_or_skip()
    modes = {key: mode for key, (_task, mode, _want) in FAULTS.items()}
    env = configured_adapters(tmp_path, FAKE_ADAPTER, modes)
    args = [a for task, _m, _w in FAULTS.values() for a in ("--task", task)]
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
            "chrome",
            "--out",
            str(tmp_path / "runs"),
            "--run-id",
            "faults",
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
    assert done.returncode == 1, done.stderr  # infra and crash rows: exit 1
    rows = {r["driver_path"]: r for r in rows_of(tmp_path / "runs" / "faults")}
    for key, (_task, _mode, want) in FAULTS.items():
        row = rows[key]
        assert (row["status"], row["failure_class"], row["origin"]) == want, (key, row["reason"])
        assert row["driver_version"] == "configured"
        if key != "stagehand":
            assert row["adapter"]["leftover_pids"] == []
    assert rows["chromedp"]["reason"].startswith("adapter_crash: adapter ended with exit status 3")
    assert rows["rod"]["reason"].startswith("adapter_garbage: stdout is not one JSON object")
    # the lazy adapter's claims are refuted: its value check, whose expected value it never
    # got, by the runner; its made-up answer by the fixture server's grader
    lazy = {c["name"]: c for c in rows["chromiumoxide"]["checks"]}
    assert rows["chromiumoxide"]["reason"].startswith("checks failed: ")
    assert lazy["answer_equals_expected"]["status"] == "fail"
    assert rows["ferrum"]["reason"].startswith("adapter_checks_missing: ")
    hang = rows["stagehand"]
    assert hang["reason"].startswith("adapter_hang: no exit within ")
    assert hang["adapter"]["exit_signal"] in (signal.SIGTERM, signal.SIGKILL)
    (grandchild,) = hang["adapter"]["leftover_pids"]  # found in the accounting group, killed
    assert not alive(grandchild)


def test_a_profiled_run_puts_the_driver_cost_beside_the_engine_cost(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    if isinstance(resolve_driver("chrome_remote_interface"), DriverMissing):
        pytest.skip("chrome-remote-interface not installed")
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--task",
        "sc_nav_title_read__cri",
        "--engines",
        "chrome",
        "--resource-profile",
        "engine",
        "--resource-calibration",
        "peer-ab",
        "--out",
        str(tmp_path),
        "--run-id",
        "prof",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    (row,) = rows_of(tmp_path / "prof")
    assert row["status"] == "pass", row["reason"]
    # two scopes, two accounting groups: the engine tree and the adapter tree
    assert row["resource"]["scope"] == "engine_scope" and row["resource"]["cpu_total_ms"] > 0
    assert row["driver_resources"]["scope"] == "harness_scope"
    assert row["driver_resources"]["cpu_total_ms"] > 0
    assert cli("report", str(tmp_path / "prof")).returncode == 0
    block = json.loads((tmp_path / "prof" / "scores.json").read_text())["by_driver_engine"]
    costs = block["chrome_remote_interface"]["chrome"]
    assert costs["engine_cost"]["engine_cpu_ms"]["median"] == row["resource"]["cpu_total_ms"]
    assert (
        costs["driver_cost"]["driver_cpu_ms"]["median"] == row["driver_resources"]["cpu_total_ms"]
    )
    assert costs["unavailable"] == {}


def test_driver_rows_keep_the_peer_layouts(driver_run: Path) -> None:
    # fields are added beside the peer's, never in place of them: the peer's readers still read
    assert cli("report", str(driver_run)).returncode == 0
    assert_peer_layouts(driver_run)


def test_compare_rolls_up_per_subset_and_per_driver_path(driver_run: Path, tmp_path: Path) -> None:
    done = cli(
        "compare", str(driver_run), str(driver_run), "--format", "json,md", "--out", str(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "compare.json").read_text())
    assert schemas.violations("metewand_compare-2", result) == []
    by_path = {(e["driver_path"], e["engine"]): e for e in result["rollups"]["driver_path"]}
    for key in _installed():
        entry = by_path[(key, "chrome")]
        assert entry["base"] == entry["new"]  # the same run on both sides
        assert entry["base"]["passed"] == entry["base"]["total"] > 0
        assert entry["base"]["driver_cpu_ms"] > 0 and entry["base"]["driver_peak_bytes"] > 0
    for key in FOREIGN_TASKS:
        assert by_path[(key, "lightpanda")]["new"]["driver_cpu_ms"] is None  # not measured
    subsets = {e["subset"] for e in result["rollups"]["subset"]}
    assert {"l1.playwright", "l2.puppeteer", "l1.chromedp"} <= subsets
    markdown = (tmp_path / "compare.md").read_text()
    assert "## Per driver path" in markdown and "## Per subset" in markdown


FLIPPED_MODE = {"long_lived": "per_attempt", "per_attempt": "long_lived"}


def test_compare_names_a_changed_driver_version(driver_run: Path, tmp_path: Path) -> None:
    if "playwright" not in _installed():
        pytest.skip("playwright-core not installed")
    other = tmp_path / "other"
    shutil.copytree(driver_run, other)
    rows = rows_of(other)
    for row in rows:
        if row["driver_path"] == "playwright":
            row["driver_version"] = "1.0.0"
            row["adapter_mode"] = FLIPPED_MODE[row["adapter_mode"]]
    (other / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = cli("compare", str(driver_run), str(other), "--json")
    assert done.returncode == 0, done.stderr
    differences = {d["fact"]: d for d in json.loads(done.stdout)["provenance_differences"]}
    assert differences["driver.playwright.version"]["base"] == DRIVER_PATHS["playwright"].version
    assert differences["driver.playwright.version"]["new"] == "1.0.0"
    assert "driver.puppeteer.version" not in differences
    mode = differences["driver.playwright.adapter_mode"]  # how the adapter ran is a fact too
    assert mode["new"] == FLIPPED_MODE[mode["base"]]
    assert "driver.puppeteer.adapter_mode" not in differences
