"""The driver-path registry against the peer's own records (pins, binding catalog, task kinds)
and the project's lock file; resolution of shipped, missing and configured adapters."""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from pathlib import Path

import pytest

from driver_helpers import CATALOG, CORPUS, REPO, corpus_or_skip
from metewand.suites.browser.driver_registry import (
    DRIVER_PATHS,
    NODE_ADAPTER_PINS,
    NODE_PEER_PINS,
    UNAVAILABLE,
    DriverMissing,
    Foreign,
    FoundDriver,
    NodePackage,
    load_binding,
    resolve_driver,
)

FOREIGN = {"chromedp": "go", "rod": "go", "chromiumoxide": "cargo", "ferrum": "ruby"}


def test_every_pinned_version_is_the_peer_harness_pin() -> None:
    pins = json.loads((corpus_or_skip() / "harness_pins.json").read_text())["drivers"]
    for path in DRIVER_PATHS.values():
        assert pins[path.pin_key]["version"] == path.version, path.key


def test_the_node_lock_pins_exactly_the_registry_versions_of_shipped_adapters() -> None:
    manifest = json.loads((REPO / "drivers/node/package.json").read_text())
    lock = json.loads((REPO / "drivers/node/package-lock.json").read_text())
    shipped = (
        {
            p.library.name: p.version
            for p in DRIVER_PATHS.values()
            if isinstance(p.library, NodePackage) and p.adapter
        }
        | NODE_PEER_PINS
        | NODE_ADAPTER_PINS
    )
    assert manifest["dependencies"] == shipped  # exact versions, no ranges
    for name, version in shipped.items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version


def test_every_route_is_the_catalog_route_on_every_engine_it_binds() -> None:
    corpus_or_skip()
    catalog = json.loads(CATALOG.read_text())
    routes = {r["route_id"] for r in catalog["routes"]}
    assert set(catalog["driver_ids"]) == set(DRIVER_PATHS)
    for binding in catalog["bindings"]:
        path = DRIVER_PATHS[binding["driver_id"]]
        if binding["browser_id"] in ("chrome", "lightpanda"):
            assert binding["route_ref"] == path.route_id, binding["binding_id"]
    assert {p.route_id for p in DRIVER_PATHS.values()} <= routes


def test_every_driver_task_kind_in_the_corpus_has_a_path_whose_subsets_hold_it() -> None:
    tasks = corpus_or_skip() / "tasks"
    seen: Counter[tuple[str, str]] = Counter()
    for file in sorted(tasks.glob("L[12]/*/*.json")):
        kind = json.loads(file.read_text()).get("driver", {}).get("kind")
        seen[(str(file.parent.relative_to(tasks)), kind)] += 1
    by_kind = {p.task_kind: p for p in DRIVER_PATHS.values()}
    for (subset, kind), _count in seen.items():
        if kind in ("raw_cdp", "node_cdp_probe") or subset == "L2/web_platform":
            continue  # the raw-CDP and probe paths the browser suite already runs
        assert kind in by_kind, (subset, kind)
        assert subset in by_kind[kind].subset_dirs, (subset, kind)


@pytest.mark.parametrize("key", sorted(FOREIGN))
def test_go_rust_and_ruby_paths_are_unavailable_naming_the_toolchain(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DRIVER_PATHS[key].env_variable, raising=False)
    found = resolve_driver(key)
    assert isinstance(found, DriverMissing)
    assert found.reason == UNAVAILABLE == "driver_unavailable"
    assert FOREIGN[key] in found.detail and DRIVER_PATHS[key].version in found.detail
    assert DRIVER_PATHS[key].env_variable in found.detail
    assert isinstance(DRIVER_PATHS[key].library, Foreign)


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_configured_adapter_is_accepted_for_a_foreign_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = _executable(tmp_path / "chromedp-adapter")
    found = resolve_driver("chromedp", str(adapter))
    assert isinstance(found, FoundDriver) and found.command.argv == (str(adapter),)
    monkeypatch.setenv("METEWAND_ROD_ADAPTER", str(adapter))
    assert isinstance(resolve_driver("rod"), FoundDriver)


def test_a_configured_adapter_serves_only_when_its_serve_variable_says_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = _executable(tmp_path / "rod-adapter")
    monkeypatch.setenv("METEWAND_ROD_ADAPTER", str(adapter))
    monkeypatch.delenv("METEWAND_ROD_ADAPTER_SERVE", raising=False)
    found = resolve_driver("rod")
    assert isinstance(found, FoundDriver) and found.command.serve_argv == ()  # per attempt
    monkeypatch.setenv("METEWAND_ROD_ADAPTER_SERVE", "--serve --quiet")
    found = resolve_driver("rod")
    assert isinstance(found, FoundDriver)
    assert found.command.serve_argv == (str(adapter), "--serve", "--quiet")
    assert found.command.argv == (str(adapter),)  # its one-shot form is unchanged
    monkeypatch.setenv("METEWAND_ROD_ADAPTER_SERVE", "")  # serves with its own argv
    found = resolve_driver("rod")
    assert isinstance(found, FoundDriver) and found.command.serve_argv == (str(adapter),)
    monkeypatch.setenv("METEWAND_ROD_ADAPTER_SERVE", "--serve 'unclosed")
    missing = resolve_driver("rod")
    assert isinstance(missing, DriverMissing)
    assert missing.detail == 'METEWAND_ROD_ADAPTER_SERVE="--serve \'unclosed": No closing quotation'


def test_a_configured_adapter_that_is_not_there_never_falls_back(tmp_path: Path) -> None:
    found = resolve_driver("playwright", str(tmp_path / "nope.js"))
    assert isinstance(found, DriverMissing) and "nope.js" in found.detail


def test_agent_browser_without_an_executable_native_cli_is_missing_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """npm ci --ignore-scripts leaves the CLI inside the package without its execute bit (its
    postinstall would chmod it): the path is missing and says so until make install sets it."""
    import platform

    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    package = tmp_path / "node_modules" / "agent-browser"
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"version": "0.31.1"}))
    binary = package / "bin" / f"agent-browser-linux-{arch}"
    binary.write_text("")
    binary.chmod(0o644)
    (tmp_path / "adapters").mkdir()
    (tmp_path / "adapters" / "agent_browser.js").write_text("")
    monkeypatch.setenv("METEWAND_NODE_DRIVERS", str(tmp_path))
    monkeypatch.delenv(DRIVER_PATHS["agent_browser"].env_variable, raising=False)
    found = resolve_driver("agent_browser")
    assert isinstance(found, DriverMissing) and "not executable" in found.detail
    binary.chmod(0o755)
    assert isinstance(resolve_driver("agent_browser"), FoundDriver)
    binary.unlink()
    found = resolve_driver("agent_browser")
    assert isinstance(found, DriverMissing) and "not in the installed package" in found.detail


@pytest.mark.parametrize(
    "key",
    [
        "playwright",
        "puppeteer",
        "chrome_remote_interface",
        "chrome_devtools_mcp",
        "selenium",
        "pydoll",
        "cdp_use",
        "stagehand",
        "agent_browser",
    ],
)
def test_a_shipped_path_resolves_to_its_pinned_install(key: str) -> None:
    found = resolve_driver(key)
    if isinstance(found, DriverMissing):
        pytest.skip(f"{key}: {found.detail}")
    assert found.version == DRIVER_PATHS[key].version
    assert Path(found.command.argv[1]).is_file() and os.access(found.command.argv[0], os.X_OK)


def test_a_node_package_at_another_version_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "node_modules" / "playwright-core"
    fake.mkdir(parents=True)
    (fake / "package.json").write_text(json.dumps({"version": "0.0.1"}))
    (tmp_path / "adapters").mkdir()
    (tmp_path / "adapters" / "playwright.js").write_text("")
    monkeypatch.setenv("METEWAND_NODE_DRIVERS", str(tmp_path))
    found = resolve_driver("playwright")
    assert isinstance(found, DriverMissing) and "0.0.1 installed, 1.61.1 pinned" in found.detail


def test_the_payload_binding_expands_the_catalog_route() -> None:
    corpus_or_skip()
    binding = load_binding(CATALOG, "chrome", "selenium")
    assert binding is not None and binding["binding_id"] == "chrome__selenium"
    route = binding["route"]
    assert (
        isinstance(route, dict)
        and route["route_id"] == "chromedriver_cdp"
        and route["provider"] == "chromedriver"
    )
    assert load_binding(CATALOG, "netscape", "selenium") is None
    assert CORPUS.is_dir()


def test_the_payload_substitutes_runner_placeholders_and_leaves_page_ones_to_the_adapter() -> None:
    from metewand.suites.browser.adapter_payload import AttemptIds, EngineEndpoint, build_payload

    task = {
        "task_id": "t1",
        "scene": {"kind": "self_hosted_fixture", "url": "/s?seed={seed}"},
        "timeouts": {"task_ms": 12000},
        "driver": {
            "kind": "framework_playwright",
            "steps": [
                {"op": "goto", "url": "{fixture_base_url}/p?{session}"},
                {"op": "goto", "url": "{fixture_url}"},
            ],
            "checks": [{"kind": "file_nonempty", "label": "f", "path": "{artifact_dir}/x"}],
        },
    }
    engine = EngineEndpoint(
        "chrome", "ws://127.0.0.1:9/devtools/browser/x", 9, "Chrome/1", "UA", "Chrome/1"
    )
    payload = build_payload(
        task, "playwright", engine, "http://127.0.0.1:7", AttemptIds("r", 2, "s0", "/a")
    )
    assert payload["protocol"] == "abb_scenario_adapter/1"
    assert payload["task_url"] == "http://127.0.0.1:7/s?seed=s0"
    assert payload["steps"][0]["url"] == "http://127.0.0.1:7/p?r-t1-chrome-2-s0"
    assert payload["steps"][1]["url"] == "{fixture_url}"  # the adapter's to substitute
    assert payload["checks"][0]["path"] == "/a/x"
    assert payload["task_timeout_ms"] == 12000 and payload["driver_key"] == "playwright"
    assert "binding" not in payload
    assert task["driver"]["steps"][0]["url"] == "{fixture_base_url}/p?{session}"  # task untouched
