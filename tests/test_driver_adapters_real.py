"""Each shipped adapter, end to end: a real headless Chromium started with the engine registry's
flags, the real fixture server on the peer corpus, real corpus driver tasks' ops through the
driver's real client library, graded by the tasks' own ``driver.checks``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from driver_helpers import (
    Bench,
    chrome_bench,
    engine_bench,
    failed_checks,
    fixture_pages,
    fixture_pages_after,
    found_or_skip,
    load_task,
    run_task,
)

pytestmark = [pytest.mark.engines, pytest.mark.slow]

# Per driver path: its corpus subset and a few tasks covering navigation and history, clicks and
# typing into an app, a form control, and the AX / computed-style observation ops.
CASES = {
    "playwright": (
        "L1/playwright",
        [
            "sc_app_add_single_item__pw",
            "sc_form_fill_overwrites__pw",
            "sc_agentloop_ax_id_stable_across_mutation__pw",
            "v3_pw_nav_back_forward",
            "sc_net_route_mock_json__pw",
            "sc_dl_download_checksum__pw",
        ],
    ),
    "puppeteer": (
        "L1/puppeteer",
        [
            "sc_app_add_single_item__pp",
            "sc_form_fill_readback__pp",
            "sc_agentloop_ax_role_name_ids__pp",
            "v3_pp_nav_goto_status",
            "sc_net_route_mock_json__pp",
            "sc_dl_download_checksum__pp",
        ],
    ),
    "chrome_remote_interface": (
        "L1/chrome_remote_interface",
        [
            "sc_app_add_single_item__cri",
            "sc_nav_back_restores__cri",
            "sc_form_checkbox_event__cri",
            "sc_computed_style_breadth__cri",
            "sc_multi_tab_collect__cri",
        ],
    ),
    "chrome_devtools_mcp": (
        "L1/chrome_devtools_mcp",
        ["sc_nav_title_read__mcp", "sc_app_full_flow_aggregate__mcp"],
    ),
    "cdp_use": (
        "L1/cdp_use",
        [
            "sc_nav_back_restores__cdpu",
            "sc_form_fill_overwrites__cdpu",
            "sc_agentloop_ax_role_name_ids__cdpu",
            "sc_form_checkbox_check__cdpu",
        ],
    ),
    "pydoll": (
        "L1/pydoll",
        ["sc_app_add_single_item__pyd", "sc_nav_back_restores__pyd", "sc_form_checkbox_check__pyd"],
    ),
    "stagehand": (
        "L1/stagehand",
        [
            "sc_app_add_single_item__sh",
            "sc_nav_back_restores__sh",
            "sc_form_checkbox_check__sh",
            "sc_agentloop_ax_role_name_ids__sh",
            "sc_computed_style_breadth__sh",
        ],
    ),
    "agent_browser": (
        "L1/agent_browser_scenarios",
        [
            "sc_app_login_greets__ab",
            "sc_nav_forward_after_back__ab",
            "sc_multi_tab_collect__ab",
            "sc_loc_missing_element_fails_cleanly__ab",
        ],
    ),
    "selenium": (
        "L1/selenium",
        [
            "sc_app_add_single_item__se",
            "sc_nav_back_restores__se",
            "sc_form_fill_overwrites__se",
            "sc_form_checkbox_check__se",
        ],
    ),
}


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from chrome_bench(tmp_path_factory.mktemp("engine-logs"))


@pytest.mark.parametrize("key", sorted(CASES))
def test_adapter_passes_real_corpus_tasks_on_chrome(key: str, bench: Bench, tmp_path: Path) -> None:
    found = found_or_skip(key)
    subset, task_ids = CASES[key]
    for task_id in task_ids:
        run = run_task(bench, found.command, key, load_task(subset, task_id), tmp_path)
        assert run.outcome == "result", (task_id, run.detail, run.stderr_tail)
        assert failed_checks(run) == [], (task_id, run.checks)
        assert run.classification().status == "pass"
        assert run.leftover_pids == []
        assert run.result is not None
        observations = run.result["observations"]
        assert observations["binding"]["verified"] is True
        if observations["binding"].get("live_check") != "navigator.userAgent":  # MCP: no raw CDP
            assert observations["binding"]["live_product"] == bench.endpoint.live_product
        # The driver's own cost is measured apart from the engine's when a cgroup is available.
        if run.accounting_backend is not None:
            assert run.cpu_ns is not None and run.cpu_ns.value is not None and run.cpu_ns.value > 0
            assert run.peak_memory_bytes is not None
    assert bench.engine.is_alive(), "an adapter took the runner's engine down"


@pytest.mark.parametrize("key", ["playwright", "cdp_use"])
def test_a_failing_check_is_an_engine_fail_not_an_adapter_problem(
    key: str, bench: Bench, tmp_path: Path
) -> None:
    found = found_or_skip(key)
    subset, task_ids = CASES[key]
    task = load_task(subset, task_ids[0])
    task["driver"]["checks"] = [
        {"kind": "saved_equals", "label": "impossible", "name": "nothing", "expected": "x"}
    ]
    run = run_task(bench, found.command, key, task, tmp_path)
    assert run.outcome == "result"
    classification = run.classification()
    assert (classification.status, classification.failure_class) == ("fail", "cdp_semantic")
    assert "impossible" in classification.reason


@pytest.mark.parametrize("key", ["puppeteer", "selenium"])
def test_an_unknown_op_fails_its_step_and_the_run_continues(
    key: str, bench: Bench, tmp_path: Path
) -> None:
    found = found_or_skip(key)
    task = load_task(*[CASES[key][0], CASES[key][1][0]])
    task["driver"]["steps"] = [
        {"op": "new_page"},
        {"op": "teleport"},
        {"op": "goto", "url": "{fixture_url}"},
    ]
    task["driver"]["checks"] = [
        {"kind": "step_fails", "label": "unknown_fails", "step": 1},
        {"kind": "step_ok", "label": "goto_still_runs", "step": 2},
    ]
    run = run_task(bench, found.command, key, task, tmp_path)
    assert run.classification().status == "pass", run.checks
    assert any("unknown op teleport" in str(c.get("evidence")) for c in run.checks)


# The paths that open an attempt's pages where --driver-isolation says; the others' libraries
# open them one way only, and their results say which.
ISOLATING = ["playwright", "puppeteer", "chrome_remote_interface", "cdp_use", "pydoll"]
ONE_WAY = {
    "selenium": "shared",
    "stagehand": "shared",
    "agent_browser": "shared",
    "chrome_devtools_mcp": "context",
}


def _cookie_task(subset: str, task_id: str, key: str) -> dict[str, Any]:
    """A task whose page sets a cookie, then reads the cookies its origin already had."""
    task = load_task(subset, task_id)
    task["driver"]["steps"] = [
        {"op": "new_page"},
        {"op": "goto", "url": "{fixture_url}"},
        {
            "op": "evaluate",
            "expression": f"(() => {{ const had = document.cookie; "
            f"document.cookie = 'mw_iso_{key}=1; path=/'; return had || '-'; }})()",
            "save_as": "had",
        },
    ]
    task["driver"]["checks"] = []
    return task


@pytest.mark.parametrize("isolation", ["context", "shared"])
@pytest.mark.parametrize("key", ISOLATING)
def test_driver_isolation_decides_whether_a_cookie_reaches_the_next_attempt(
    key: str, isolation: str, bench: Bench, tmp_path: Path
) -> None:
    """context: the second attempt's page finds no cookie of the first (its own context);
    shared: it finds it (the engine's default context, as the peer's adapters use). Each
    result says where its pages were; the pages are closed either way."""
    found = found_or_skip(key)
    subset, task_ids = CASES[key]
    task = _cookie_task(subset, task_ids[0], f"{key}_{isolation}")
    before = fixture_pages(bench)
    runs = [
        run_task(bench, found.command, key, task, tmp_path, attempt, isolation)
        for attempt in (1, 2)
    ]
    for run in runs:
        assert run.outcome == "result" and run.result is not None, (run.detail, run.stderr_tail)
        assert run.result["isolation"] == isolation
        assert run.leftover_pids == []
    had = str(runs[1].result["observations"]["saved"]["had"])  # type: ignore[index]
    assert (f"mw_iso_{key}_{isolation}=1" in had) == (isolation == "shared"), had
    assert fixture_pages_after(bench, before) <= before  # every page they opened is closed


@pytest.mark.parametrize("key", sorted(ONE_WAY))
def test_a_path_with_one_way_to_open_pages_says_which(
    key: str, bench: Bench, tmp_path: Path
) -> None:
    found = found_or_skip(key)
    subset, task_ids = CASES[key]
    for asked in ("context", "shared"):
        run = run_task(
            bench, found.command, key, load_task(subset, task_ids[0]), tmp_path, 1, asked
        )
        assert run.result is not None, (run.detail, run.stderr_tail)
        assert run.result["isolation"] == ONE_WAY[key], asked


def test_the_binding_gate_refuses_another_engine(bench: Bench, tmp_path: Path) -> None:
    """A payload naming another product is refused before any step: a harness error (infra)."""
    from dataclasses import replace

    found = found_or_skip("chrome_remote_interface")
    subset, task_ids = CASES["chrome_remote_interface"]
    wrong = Bench(bench.engine, bench.server, replace(bench.endpoint, product="Chrome/1.0.0.0"))
    run = run_task(
        wrong, found.command, "chrome_remote_interface", load_task(subset, task_ids[0]), tmp_path
    )
    assert run.outcome == "adapter_error"
    assert "binding gate" in run.detail
    assert run.classification().status == "infra"


@pytest.fixture(scope="module")
def lightpanda(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from engine_bench("lightpanda", tmp_path_factory.mktemp("lightpanda-logs"))


@pytest.mark.parametrize("key", sorted(CASES))
def test_on_lightpanda_every_adapter_ends_with_a_result_never_an_adapter_problem(
    key: str, lightpanda: Bench, tmp_path: Path
) -> None:
    """What Lightpanda lacks is the engine's fail; the adapter itself must not crash, hang or
    refuse (the issue's 'no infra rows' on Lightpanda)."""
    found = found_or_skip(key)
    subset, task_ids = CASES[key]
    run = run_task(lightpanda, found.command, key, load_task(subset, task_ids[0]), tmp_path)
    assert run.outcome == "result", (run.detail, run.stderr_tail)
    assert run.classification().origin != "adapter"
    assert run.leftover_pids == []
    assert lightpanda.engine.is_alive()


# Fault injection: the MCP server takes 400 ms longer to exit than it would, as on a loaded host
# (its shutdown on TERM or stdin's end ends in process.exit). The adapter itself is left alone.
SLOW_EXIT = """
if (process.argv[1] && process.argv[1].includes('chrome-devtools-mcp')) {
  const exit = process.exit.bind(process);
  process.exit = (code) => { setTimeout(() => exit(code), 400); };
}
"""


def test_the_mcp_adapter_exits_only_after_its_server(bench: Bench, tmp_path: Path) -> None:
    """The one-shot MCP adapter waits for the server it started: a server still going when the
    adapter exits would be a leftover (CI at load once saw one outlive the harness's grace)."""
    found = found_or_skip("chrome_devtools_mcp")
    preload = tmp_path / "slow_exit.js"
    preload.write_text(SLOW_EXIT)
    env = {**found.command.env, "NODE_OPTIONS": f"--require {preload}"}
    command = dataclasses.replace(found.command, env=env)
    task = load_task("L1/chrome_devtools_mcp", "sc_nav_title_read__mcp")
    run = run_task(bench, command, "chrome_devtools_mcp", task, tmp_path)
    assert run.outcome == "result", (run.detail, run.stderr_tail)
    assert run.leftover_pids == []
    assert run.wall_ns > 400_000_000  # the adapter did wait for its server
