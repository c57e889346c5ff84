"""A runner killed with kill -9 leaves its engines' private dirs; --resume removes exactly the
ones its engines owned, and nothing a tampered engine_pids.jsonl points at."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from browser_engine_fixtures import resolved_or_skip
from browser_run_helpers import (
    ABOUT_BLANK_TASK,
    cli,
    manifest_of,
    rows_of,
    run_killed_after_rows,
    tiny_corpus,
)
from metewand.suites.browser import private_dirs
from metewand.suites.browser.leftovers import PID_FILE, recorded_dirs, run_processes

pytestmark = pytest.mark.engines

TEMP = Path(os.path.realpath(tempfile.gettempdir()))
K = 12


def _kill_runner_mid_run(corpus: Path, out: Path, run_id: str) -> Path:
    return run_killed_after_rows(
        ["--tasks", str(corpus), "--engines", "chrome,lightpanda", "--k", str(K)],
        out,
        run_id,
        rows=2,
    )


def _decoys(tmp_path: Path, run_id: str) -> list[Path]:
    """Dirs a tampered record may name; none is this run's, so all must survive."""
    outside = tmp_path / "metewand-chrome-outside1"  # right name and owner, wrong place
    outside.mkdir()
    (outside / private_dirs.OWNER_FILE).write_text(run_id)
    other_run = private_dirs.make_root("chrome", f"{run_id}-other")
    target = tmp_path / "precious"
    target.mkdir()
    (target / private_dirs.OWNER_FILE).write_text(run_id)
    link = TEMP / f"metewand-chrome-{other_run.name[-8:]}l"
    link.symlink_to(target, target_is_directory=True)
    return [outside, other_run, link, target, Path("/etc")]


def test_resume_removes_the_killed_runs_dirs_and_nothing_else(tmp_path: Path) -> None:
    resolved_or_skip("chrome"), resolved_or_skip("lightpanda")
    run_id = f"pd-kill-{os.getpid()}"
    corpus = tiny_corpus(tmp_path / "corpus", {"tiny.json": ABOUT_BLANK_TASK})
    run_dir = _kill_runner_mid_run(corpus, tmp_path / "runs", run_id)
    left = [Path(d) for d in recorded_dirs(run_dir)]
    assert run_processes(run_dir, run_id), "kill -9 of the runner should orphan its engines"
    assert {d.name.split("-")[1] for d in left if d.exists()} == {"chrome", "lightpanda"}
    singletons = [
        Path(os.readlink(d / "profile" / "SingletonSocket")).parent
        for d in left
        if (d / "profile" / "SingletonSocket").is_symlink()
    ]
    assert singletons and all(s.parent.parent in left for s in singletons)
    decoys = _decoys(tmp_path, run_id)
    with open(run_dir / PID_FILE, "a") as handle:
        handle.write(
            json.dumps({"pid": 1, "engine": "chrome", "private_dirs": [str(d) for d in decoys]})
            + "\n"
        )
        handle.write("not json\n")
    try:
        done = cli("browser", "run", "--resume", str(run_dir), "--no-progress")
        assert done.returncode == 0, done.stderr
        assert "left by an earlier run" in done.stderr
        assert manifest_of(run_dir)["state"] == "complete"
        assert len(rows_of(run_dir)) == 2 * K
        assert run_processes(run_dir, run_id) == []
        for path in [*left, *singletons, *map(Path, recorded_dirs(run_dir))]:
            if path not in decoys:
                assert not path.exists(), f"{path} was left behind"
        for decoy in decoys:
            assert decoy.exists(), f"{decoy} was removed"
        assert decoys[2].is_symlink() and (decoys[3] / private_dirs.OWNER_FILE).is_file()
    finally:
        decoys[2].unlink()
        shutil.rmtree(decoys[1], ignore_errors=True)
