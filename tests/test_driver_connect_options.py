"""A task's ``driver.connect_options`` reach the library's connect call, over the adapter's
defaults, as on the peer's Puppeteer path: no default viewport unless the task gives one (so no
``Emulation.setDeviceMetricsOverride`` on every new page). Real Puppeteer on real Chrome and
Lightpanda, through ``metewand browser run``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from browser_engine_fixtures import resolved_or_skip
from browser_run_helpers import cli, lexbench_or_skip, rows_of, tiny_corpus
from metewand.suites.browser.adapter_payload import AttemptIds, EngineEndpoint, build_payload

pytestmark = pytest.mark.engines

SIZES = "`${innerWidth}x${innerHeight}/${outerWidth}x${outerHeight}`"


def _task(task_id: str, options: dict[str, Any] | None) -> dict[str, Any]:
    driver: dict[str, Any] = {
        "kind": "framework_puppeteer",
        "steps": [
            {"op": "new_page"},
            {"op": "evaluate", "expression": SIZES, "save_as": "sizes"},
        ],
        "checks": [{"kind": "saved_truthy", "label": "sizes", "name": "sizes"}],
    }
    if options is not None:
        driver["connect_options"] = options
    return {
        "artifact_profile": "l1_standard",
        "description": "The page's inner and outer sizes, as Puppeteer left them.",
        "driver": driver,
        "features": ["fw.puppeteer.puppeteer.connect"],
        "grader": {"kind": "inline_assertions", "checks": []},
        "layer": "L1",
        "scene": {"kind": "about_blank"},
        "subset_id": "t.pp",
        "tags": ["tiny"],
        "task_id": task_id,
        "task_version": 1,
        "timeouts": {"hard_kill_ms": 45000, "task_ms": 30000},
    }


def _corpus(root: Path) -> Path:
    given = {"defaultViewport": {"width": 1000, "height": 700}}
    tiny_corpus(root, {"a.json": _task("vp_default", None), "b.json": _task("vp_given", given)})
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["layers"][0]["subsets"] = [
        {"subset_id": "t.pp", "driver": "framework_puppeteer", "task_glob": "tasks/*.json"}
    ]
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "config").mkdir()
    catalog = "browser_driver_bindings.json"
    shutil.copy(lexbench_or_skip() / "config" / catalog, root / "config" / catalog)
    return root


def _sizes(row: dict[str, Any]) -> str:
    (evidence,) = [c["evidence"] for c in row["checks"] if c["name"] == "sizes"]
    return str(evidence).removeprefix("saved sizes=").strip('"')


def test_the_tasks_viewport_is_given_and_none_is_emulated_without_it(tmp_path: Path) -> None:
    for engine in ("chrome", "lightpanda"):
        resolved_or_skip(engine)
    root = _corpus(tmp_path / "corpus")
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(root),
        "--engines",
        "chrome,lightpanda",
        "--out",
        str(tmp_path / "out"),
        "--run-id",
        "vp",
        "--no-progress",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sizes = {(r["task_id"], r["engine"]): _sizes(r) for r in rows_of(tmp_path / "out" / "vp")}
    print(sizes)
    for engine in ("chrome", "lightpanda"):
        assert sizes[("vp_given", engine)].startswith("1000x700/"), sizes
    # no emulation: Chrome's page is as wide as its window (Puppeteer's own default, 800x600,
    # would make it 800 wide in a window of another width)
    inner, outer = sizes[("vp_default", "chrome")].split("/")
    assert inner.split("x")[0] == outer.split("x")[0], sizes
    assert not inner.startswith("1000x"), sizes


def test_connect_options_are_in_the_payload_only_when_the_task_has_them(tmp_path: Path) -> None:
    endpoint = EngineEndpoint("chrome", "ws://127.0.0.1:9/devtools/browser/x", 9, "C", "UA", "C")
    ids = AttemptIds("run", 1, "seed", str(tmp_path / "artifacts"))
    base = "http://127.0.0.1:9"
    plain = build_payload(_task("a", None), "puppeteer", endpoint, base, ids, None)
    assert "connect_options" not in plain
    given = {"defaultViewport": {"width": 1, "height": 2}}
    payload = build_payload(_task("b", given), "puppeteer", endpoint, base, ids, None)
    assert payload["connect_options"] == given
