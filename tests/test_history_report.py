"""`history report` renders in headless Chromium with a chart per group and the change marked."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metewand.history import synthetic

pytestmark = pytest.mark.engines


def test_report_renders_a_chart_per_group_in_chromium(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no chromium")
    synthetic.build(tmp_path / "h.duckdb", 40, 6, sigma=0.02, step=0.3, step_at=25, step_groups=2)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metewand",
            "history",
            "report",
            "--history",
            str(tmp_path / "h.duckdb"),
            "--out",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    page = tmp_path / "site" / "compute.html"
    base = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    # every group and the run-wide factor in "Every group", the two stepped ones again under
    # "Groups with change points"
    assert dom.count('<svg class="chart"') == 6 + 1 + 2, dom[:500]
    assert dom.count('class="change"') >= 4  # each stepped group's line, in both sections
    shot = tmp_path / "shot.png"
    subprocess.run(
        [*base, "--window-size=1100,1400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert shot.stat().st_size > 20_000  # a drawn page, not a blank one


def test_report_says_what_check_says_of_each_steps_inputs(tmp_path: Path) -> None:
    """Two groups step at run 26; only the first one's declared inputs changed there. The
    report's cause column and marks agree with ``check``: the first is the commit's (red), the
    second an environment shift (a grey line and a grey label, the label not stroked)."""
    synthetic.build(
        tmp_path / "h.duckdb",
        40,
        6,
        sigma=0.02,
        step=0.3,
        step_at=25,
        step_groups=2,
        inputs_groups=1,
    )
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "history", "report"]
        + ["--history", str(tmp_path / "h.duckdb"), "--out", str(tmp_path / "site")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "site" / "compute.html").read_text()
    # each stepped group is drawn twice: under "Groups with change points" and "Every group"
    assert page.count("inputs unchanged: an environment shift") == 2, page[-3000:]
    assert page.count("inputs changed at run syn00025") == 2, page[-3000:]
    assert page.count('class="change env"') >= 1 and page.count('class="change-label env"') >= 1
    assert 'class="change env-label"' not in page
