"""Issue #16 (browser): phase marks through `metewand browser run` on real engines, the "where
the time and CPU go" table, top steps and chart (scores, scorecard, report.html in headless
Chromium), `--no-phase-marks`, a driver path's coarse marks, and `compare --metric phase....`."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from browser_run_helpers import cli, lexbench_or_skip, manifest_of, rows_of, tiny_corpus
from metewand import canonical
from metewand.compare.generate import generate
from metewand.runtime.schemas import violations
from test_browser_phases import BURN_STEP, _burn_task
from test_compute_phases_report import CHART, CHROME, _open

pytestmark = pytest.mark.engines
ENGINES = "chrome,lightpanda"


def _run(corpus: Path, out: Path, run_id: str, *extra: str) -> Path:
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        ENGINES,
        "--k",
        "2",
        "--out",
        str(out),
        "--run-id",
        run_id,
        "--no-progress",
        *extra,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out / run_id


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_corpus(tmp_path_factory.mktemp("burn") / "corpus", {"burn.json": _burn_task()})


@pytest.fixture(scope="module")
def marked(corpus: Path) -> Path:
    return _run(corpus, corpus.parent / "runs", "marked")


def test_every_row_carries_its_phases(marked: Path) -> None:
    rows = rows_of(marked)
    assert len(rows) == 4 and {r["status"] for r in rows} == {"pass"}
    assert manifest_of(marked)["data"]["phase_marks"] is True
    for row in rows:
        phases = row["phases"]
        assert violations("metewand_browser_attempt_phases-1", phases) == []
        assert phases["granularity"] == "steps"
        engine = phases["engine"]
        # a functional run (no resource profile): the engine joined a group for the marks
        assert engine["total"]["cpu_time_ns"]["status"] == "complete"
        names = [p["name"] for p in engine["phases"]]
        assert names[:3] == ["connect", "page_create", "scene"] and BURN_STEP in names
        steps = {p["name"]: p["cpu_time_ns"]["value"] for p in engine["phases"]}
        others = [v for name, v in steps.items() if name.startswith("step") and name != BURN_STEP]
        assert steps[BURN_STEP] > 3 * max(others), row["engine"]  # the loop's CPU is here
        assert row["phases"]["harness"]["total"]["cpu_time_ns"]["status"] == "complete"
        assert set(row) >= {"task_id", "engine", "status", "duration_ms"}  # the peer's fields


def test_scores_scorecard_and_top_steps(marked: Path) -> None:
    written = generate(marked, ["md", "json"])
    scores = canonical.loads(written["json"].read_bytes())
    blocks = {(b["case"], b["implementation"]): b for b in scores["phase_costs"]}
    assert set(blocks) == {("burn", "chrome"), ("burn", "lightpanda")}
    for block in blocks.values():
        engine = {p["name"]: p for p in block["groups"]["engine"]["phases"]}
        assert engine[BURN_STEP]["n"] == 2
        shares = [p["cpu_share"] for name, p in engine.items() if name != "total"]
        assert sum(shares) == pytest.approx(1.0, abs=1e-5)
    top = scores["phase_top_steps"]
    # the busy loop dominates Lightpanda's CPU (a single process with little else to do)
    assert top["lightpanda"]["steps"][0]["step"] == "Runtime.evaluate"
    assert top["lightpanda"]["steps"][0]["cpu_share"] > 0.5
    for block in top.values():
        # each share is rounded to 6 decimals: the sum may pass 1 by half a millionth each
        assert sum(e["cpu_share"] for e in block["steps"]) <= 1.0 + 1e-5
    card = written["md"].read_text()
    assert "## Top steps by engine CPU" in card and "## Where the time and CPU go" in card
    assert "- Runtime.evaluate costs " in card or "Runtime.evaluate costs" in card
    line = next(x for x in card.splitlines() if f"| lightpanda | engine | {BURN_STEP} |" in x)
    assert line.split("|")[5].strip() == "2"


@pytest.mark.skipif(CHROME is None or not hasattr(CHROME, "argv"), reason="needs chromium")
def test_the_phase_section_renders_in_headless_chromium(marked: Path, tmp_path: Path) -> None:
    html = generate(marked, ["html"])["html"]
    seen = asyncio.run(_open(html.as_uri(), tmp_path / "profile"))
    assert [e for e in seen["events"] if e["method"] == "Runtime.exceptionThrown"] == []
    assert seen["image"]["done"] and seen["image"]["natural"] > 300
    text = seen["text"]
    assert "Where the time and CPU go (per task × engine)" in text
    assert "Top steps by engine CPU" in text and BURN_STEP in text
    png = base64.b64decode(seen["src"].split(",", 1)[1])
    chart = mpimg.imread(io.BytesIO(png), format="png")[..., :3]
    assert len(np.unique(chart.reshape(-1, 3), axis=0)) > 20  # coloured segments, not a blank


def test_no_phase_marks_leaves_no_phases_and_no_table(corpus: Path) -> None:
    run_dir = _run(corpus, corpus.parent / "runs", "unmarked", "--no-phase-marks")
    assert manifest_of(run_dir)["data"]["phase_marks"] is False
    assert all("phases" not in row for row in rows_of(run_dir))
    written = generate(run_dir, ["md", "json", "html"])
    assert "phase_costs" not in canonical.loads(written["json"].read_bytes())
    assert "Where the time" not in written["md"].read_text()
    assert CHART not in written["html"].read_text()


def test_compare_a_browser_phase_metric(corpus: Path, marked: Path, tmp_path: Path) -> None:
    other = _run(corpus, corpus.parent / "runs", "marked2")
    metric = f"phase.{BURN_STEP}.cpu_ns"
    done = cli(
        "compare",
        str(marked),
        str(other),
        "--metric",
        metric,
        "--format",
        "json",
        "--out",
        str(tmp_path / "cmp"),
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: a verdict says slower
    report = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert report["metric"] == metric
    assert len(report["groups"]) == 2
    for group in report["groups"]:
        for side, run_dir in (("base", marked), ("new", other)):
            values = [
                next(p for p in r["phases"]["engine"]["phases"] if p["name"] == BURN_STEP)
                for r in rows_of(run_dir)
                if r["engine"] == group["engine"]
            ]
            expected = np.median([p["cpu_time_ns"]["value"] for p in values])
            assert group[side]["n"] == 2 and group[side]["median"] == pytest.approx(expected)
    bad = cli("compare", str(marked), str(other), "--metric", "phase.nothing")
    assert bad.returncode == 2


def test_a_driver_path_is_marked_op_by_op(tmp_path: Path) -> None:
    """A shipped adapter marks its ops over the mark channel (op_marks): each op is a phase,
    and the report's top steps name them as op kinds (tests/test_browser_driver_op_marks.py
    checks the attribution)."""
    corpus = lexbench_or_skip()
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--task",
        "sc_nav_title_read__cri",
        "--engines",
        "chrome",
        "--out",
        str(tmp_path),
        "--run-id",
        "cri",
        "--no-progress",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = rows_of(tmp_path / "cri")
    phases = row["phases"]
    assert violations("metewand_browser_attempt_phases-1", phases) == []
    assert phases["granularity"] == "driver_ops"
    # where the engine has a cgroup the adapter read its counters at each op itself; the /proc
    # fallback's process counts are partial (a walk from the root) and it reads them here
    proc = phases["engine"]["total"]["process_count_end"]["status"] == "partial"
    read_by = "harness" if proc else "adapter"
    assert phases["driver_marks"] == {"received": 5, "refused": 0, "read_by": read_by}
    names = [p["name"] for p in phases["engine"]["phases"]]
    assert names == [
        "target_snapshot",
        "adapter_run",
        "driver_connect",
        "op0:new_page",
        "op1:goto",
        "op2:text_content",
        "driver_close",
        "state_clear",  # the default isolation: its default-context page cleared after it
        "grade",
    ]
    goto = phases["engine"]["phases"][4]
    assert goto["cpu_time_ns"]["value"] > 0  # the adapter's navigation drove the engine here
    scores = json.loads((tmp_path / "cri" / "scores.json").read_text())
    kinds = {s["step"] for s in scores["phase_top_steps"]["chrome"]["steps"]}
    assert any(kind.startswith("op:") for kind in kinds), kinds  # ops by kind, index dropped


def test_a_profiled_run_leaves_the_end_scan_between_marks(corpus: Path) -> None:
    run_dir = _run(
        corpus,
        corpus.parent / "runs",
        "profiled",
        "--resource-profile",
        "engine",
        "--cold-start-samples",
        "0",
        "--resource-calibration",
        "peer-ab",
    )
    for row in rows_of(run_dir):
        assert row["resource_forms"]["scope"] == "engine_scope"  # the sampler ran beside marks
        for scope in ("engine", "harness"):
            record = row["phases"][scope]
            # before the first mark, and the observer's end scan before the page closes
            assert record["between_marks"]["stretches"] == 2
            spans = [*record["phases"], record["between_marks"]]
            cpu = sum(s["cpu_time_ns"]["value"] for s in spans)
            assert cpu == record["total"]["cpu_time_ns"]["value"]
        # the end scan walks the engine's memory from this process: harness CPU between marks
        assert row["phases"]["harness"]["between_marks"]["cpu_time_ns"]["value"] > 0
