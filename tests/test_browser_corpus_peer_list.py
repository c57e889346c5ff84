"""``metewand browser list --tasks ../shared/corpus/lexbench``: every task file of the peer's
corpus is valid or in a subset not run yet with its reason — 0 invalid (issue #11 §4) — and each
driver path is found or missing with why (issue #15)."""

from __future__ import annotations

import json

from browser_run_helpers import cli, lexbench_or_skip
from metewand.suites.browser.driver_paths import RUNNABLE_PATHS
from metewand.suites.browser.driver_registry import ALL_PATHS, BY_TASK_KIND
from metewand.suites.browser.drivers import DRIVERS


def test_peer_corpus_lists_zero_invalid_and_says_why_subsets_do_not_run() -> None:
    corpus = lexbench_or_skip()
    done = cli("browser", "list", "--tasks", str(corpus), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["invalid"] == []
    runnable = {s["subset_id"]: s["tasks"] for s in data["subsets"] if s["tasks"]}
    # every subset runs: issue #15 wired the driver paths, then the agent-browser CLI probes
    assert {s["subset_id"] for s in data["subsets"]} == set(runnable)
    assert runnable["l1.agent_browser_tool"] == 60
    on_disk = sum(1 for _ in corpus.glob("tasks/L[12]/*/*.json"))
    assert data["not_run_yet"] == 0
    assert sum(runnable.values()) == on_disk
    text = cli("browser", "list", "--tasks", str(corpus)).stdout
    assert "0 not run yet, 0 invalid" in text


def test_browser_list_names_each_driver_path_found_or_missing_with_why() -> None:
    corpus = lexbench_or_skip()
    data = json.loads(cli("browser", "list", "--tasks", str(corpus), "--json").stdout)
    drivers = {d["driver_path"]: d for d in data["drivers"]}
    assert set(drivers) == set(ALL_PATHS)  # the catalog's drivers and the probe-script paths
    for key, toolchain in (
        ("chromedp", "go"),
        ("rod", "go"),
        ("chromiumoxide", "cargo"),
        ("ferrum", "ruby"),
    ):
        assert drivers[key]["found"] is False and drivers[key]["reason"] == "driver_unavailable"
        assert f"({toolchain} toolchain" in drivers[key]["detail"], drivers[key]
    for entry in drivers.values():
        if entry["found"]:  # found: the installed version is the pinned one
            assert entry["version"] == entry["pinned_version"], entry
        else:
            assert entry["detail"], entry
    text = cli("browser", "list", "--tasks", str(corpus)).stdout
    assert "driver paths:" in text
    assert any(line.split()[:2] == ["ferrum", "missing"] for line in text.splitlines())


def test_every_runnable_driver_kind_has_a_runner() -> None:
    # The registry of driver paths and the registries of runners move together (issue #15):
    # metewand's own CDP drivers, and every driver path's adapter through adapter_attempt.
    assert set(RUNNABLE_PATHS) == set(DRIVERS) | set(BY_TASK_KIND)
    assert not set(DRIVERS) & set(BY_TASK_KIND)


def test_browser_list_shows_each_subsets_tags_with_counts() -> None:
    """Issue #30: which tags exist where, so a --tag never has to be guessed."""
    corpus = lexbench_or_skip()
    data = json.loads(cli("browser", "list", "--tasks", str(corpus), "--json").stdout)
    tags = {s["subset_id"]: s["tags"] for s in data["subsets"]}
    on_disk: dict[str, dict[str, int]] = {}
    for path in corpus.glob("tasks/L[12]/*/*.json"):
        task = json.loads(path.read_text())
        for tag in task["tags"]:
            counts = on_disk.setdefault(task["subset_id"], {})
            counts[tag] = counts.get(tag, 0) + 1
    assert tags == on_disk
    assert tags["l1.raw_cdp"]["purpose.smoke"] == 4 and "purpose.smoke" not in tags["l1.playwright"]
    text = cli("browser", "list", "--tasks", str(corpus)).stdout
    shown = text.split("  l1.raw_cdp ", 1)[1].split("\n  l1.", 1)[0]  # its tags lines
    assert "purpose.smoke 4" in " ".join(shown.split())


def test_an_empty_selection_says_which_filter_removed_what() -> None:
    corpus = lexbench_or_skip()
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--subset",
        "l1.playwright",
        "--tag",
        "purpose.smoke",
        "--engines",
        "chrome",
    )
    assert done.returncode == 2
    assert "--tag purpose.smoke: 4 tasks, all in l1.raw_cdp" in done.stderr, done.stderr
    assert "--subset l1.playwright: 0 of them (on its own 112 tasks)" in done.stderr
    done = cli(
        "browser", "run", "--tasks", str(corpus), "--tag", "purpose.smok", "--engines", "chrome"
    )
    assert done.returncode == 2 and "--tag purpose.smok: no task has this tag" in done.stderr
    assert "did you mean purpose.smoke" in done.stderr
