"""--score-mode peer-compatible (issue #25): an L1 server-graded driver row is graded by the
server's verdict alone, as the peer's published numbers were; the default still needs every
declared check. One real Chrome, the real fixture server and Playwright, a one-task corpus whose
task declares a driver check that cannot pass while its answer is right. The same runs show the
manifest's driver provenance and the peer's eligibility rule."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import cli, manifest_of, rows_of
from driver_helpers import found_or_skip, load_task
from shared_paths import lexbench_or_skip

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def _corpus(root: Path) -> Path:
    corpus = lexbench_or_skip()
    (root / "tasks").mkdir(parents=True)
    for shared in ("fixtures", "config"):
        (root / shared).symlink_to(corpus / shared)
    manifest = {
        "bench_id": "t",
        "bench_version": "0.0.1",
        "default_k_runs": 1,
        "layers": [
            {
                "layer_id": "L1",
                "subsets": [
                    {
                        "subset_id": "t.pw",
                        "driver": "framework_playwright",
                        "task_glob": "tasks/*.json",
                    }
                ],
            }
        ],
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    task = load_task("L1/playwright", "sc_nav_title_read__pw")
    assert task["grader"]["kind"] == "server_side"
    task["subset_id"] = "t.pw"
    task["driver"]["checks"].append(
        {"kind": "saved_equals", "label": "never", "name": "answer", "expected": "no such title"}
    )
    (root / "tasks" / "task.json").write_text(json.dumps(task))
    return root


def _run(
    corpus: Path, out: Path, run_id: str, *extra: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "chrome",
        "--k",
        "1",
        "--out",
        str(out),
        "--run-id",
        run_id,
        "--no-progress",
        *extra,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    (row,) = rows_of(out / run_id)
    return row, manifest_of(out / run_id)


def test_peer_compatible_grades_l1_server_rows_by_the_answer_alone(tmp_path: Path) -> None:
    found_or_skip("playwright")
    corpus = _corpus(tmp_path / "corpus")
    strict, manifest = _run(corpus, tmp_path / "runs", "strict")
    assert strict["status"] == "fail" and "never" in strict["reason"], strict["reason"]
    peer, peer_manifest = _run(corpus, tmp_path / "runs", "peer", "--score-mode", "peer-compatible")
    assert peer["status"] == "pass", peer["reason"]
    assert any(
        c["name"] == "never" and c["status"] == "fail" for c in peer["checks"]
    )  # kept, ungraded
    assert (manifest["score_mode"], peer_manifest["score_mode"]) == (
        "independent",
        "peer-compatible",
    )
    card = cli("report", str(tmp_path / "runs" / "peer"))
    assert card.returncode == 0, card.stderr
    assert (
        "Score mode: peer-compatible" in (tmp_path / "runs" / "peer" / "scorecard.md").read_text()
    )
    # the peer's rule: one engine of the roster is a partial engine set
    assert manifest["score_eligible"] is False
    assert manifest["score_ineligible_reasons"] == ["partial engine set"]
    # every driver path the run used, with versions and lock hash; no host path in the row
    drivers = manifest["runner"]["harness_pins"]["drivers"]
    assert list(drivers) == ["playwright-core"]
    entry = drivers["playwright-core"]
    assert entry["installed"] == entry["pinned"] == "1.61.1"
    assert entry["adapter"] == "drivers/node/adapters/playwright.js"
    assert len(entry["lock_sha256"]) == 64 and entry["integrity"].startswith("sha512-")
    assert strict["driver_source"] == "shipped drivers/node/adapters/playwright.js"
    launch = " ".join(strict["engine_provenance"]["launch_command"])
    assert "<private-dir>" in launch and tempfile.gettempdir() + "/" not in launch
