"""``metewand browser list --tasks ../shared/corpus/lexbench``: every task file of the peer's
corpus is valid or in a subset not run yet with its reason — 0 invalid (issue #11 §4)."""

from __future__ import annotations

import json

from browser_run_helpers import cli, lexbench_or_skip
from metewand.suites.browser.driver_paths import RUNNABLE_PATHS
from metewand.suites.browser.drivers import DRIVERS


def test_peer_corpus_lists_zero_invalid_and_says_why_subsets_do_not_run() -> None:
    corpus = lexbench_or_skip()
    done = cli("browser", "list", "--tasks", str(corpus), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["invalid"] == []
    runnable = {s["subset_id"]: s["tasks"] for s in data["subsets"] if s["tasks"]}
    assert set(runnable) == {"l1.raw_cdp", "l2.web_platform"}
    on_disk = sum(1 for _ in corpus.glob("tasks/L[12]/*/*.json"))
    assert sum(runnable.values()) + data["not_run_yet"] == on_disk
    for subset in data["subsets"]:
        if subset["subset_id"] not in runnable:
            assert subset["why_no_runnable_task"].startswith("driver path "), subset
            assert subset["why_no_runnable_task"].endswith(" not implemented yet"), subset
    text = cli("browser", "list", "--tasks", str(corpus)).stdout
    assert f"{data['not_run_yet']} not run yet, 0 invalid" in text
    assert "l1.playwright" in text and "driver path framework_playwright not implemented" in text


def test_every_runnable_driver_kind_has_a_runner() -> None:
    # The registry of driver paths and the registry of runners move together (issue #15).
    assert set(RUNNABLE_PATHS) == set(DRIVERS)
