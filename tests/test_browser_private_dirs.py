"""Each engine launch runs in a private root (user-data dir + TMPDIR) that stop() removes, and
only roots this run owns are ever removed by the leftovers cleanup."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_engine_fixtures import REAL_ENGINES, resolved_or_skip
from metewand.suites.browser import private_dirs
from metewand.suites.browser.engine_pool import marked_engine
from metewand.suites.browser.engine_process import EngineProcess

pytestmark = pytest.mark.engines

TEMP = Path(os.path.realpath(tempfile.gettempdir()))


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (item.decode(errors="replace").partition("=") for item in raw if b"=" in item)
    return {key: value for key, _, value in pairs}


def _singleton_dir(root: Path) -> Path:
    """The dir Chromium made for its singleton socket (profile/SingletonSocket links into it)."""
    target = Path(os.readlink(root / private_dirs.PROFILE_DIR / "SingletonSocket"))
    assert target.name == "SingletonSocket"
    return target.parent


@pytest.mark.parametrize("name", REAL_ENGINES)
def test_engine_runs_in_a_private_root_that_stop_removes(name: str, tmp_path: Path) -> None:
    process = EngineProcess(marked_engine(resolved_or_skip(name), "pd-run"), tmp_path)

    async def scenario() -> list[Path]:
        await process.start()
        try:
            [root_text] = process.private_dirs
            root = Path(root_text)
            assert root.parent == TEMP and root.name.startswith(f"metewand-{name}-")
            assert (root / private_dirs.OWNER_FILE).read_text() == "pd-run"
            assert os.readlink(f"/proc/{process.pid}/cwd") == str(root)
            made = [root]
            if name == "chrome":
                # the browser rewrites its own environ; its singleton dir shows the TMPDIR used
                singleton = _singleton_dir(root)
                assert singleton.parent == root / private_dirs.TMP_DIR
                assert singleton.name.startswith("org.chromium.Chromium.")
                assert f"--user-data-dir={root / private_dirs.PROFILE_DIR}" in process.argv
                made.append(singleton)
            else:
                assert _environ(int(str(process.pid)))["TMPDIR"] == str(root / "tmp")
            return made
        finally:
            assert (await process.stop()).clean

    made = asyncio.run(scenario())
    assert process.private_dirs == []
    for path in made:
        assert not path.exists(), f"{path} survived stop()"


@pytest.fixture
def roots() -> Iterator[list[Path]]:
    """Roots made by a test (removed at the end whatever the test did to them)."""
    made: list[Path] = []
    yield made
    for path in made:
        if path.is_symlink():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)


def test_owned_root_accepts_only_this_runs_real_roots(tmp_path: Path, roots: list[Path]) -> None:
    mine = private_dirs.make_root("chrome", "run-a")
    other_run = private_dirs.make_root("chrome", "run-b")
    no_owner = private_dirs.make_root("lightpanda", "run-a")
    roots += [mine, other_run, no_owner]
    (no_owner / private_dirs.OWNER_FILE).unlink()
    link = TEMP / f"metewand-chrome-{mine.name[-8:]}x"
    link.symlink_to(mine, target_is_directory=True)
    roots.append(link)
    outside = tmp_path / mine.name  # right name and owner, wrong place
    outside.mkdir()
    (outside / private_dirs.OWNER_FILE).write_text("run-a")
    odd_name = Path(tempfile.mkdtemp(prefix="someone-else-"))
    (odd_name / private_dirs.OWNER_FILE).write_text("run-a")
    roots.append(odd_name)

    assert private_dirs.owned_root(str(mine), "run-a") == mine
    for path in (other_run, no_owner, link, outside, odd_name):
        assert private_dirs.owned_root(str(path), "run-a") is None, path
    assert private_dirs.owned_root(f"{mine}/../{mine.name}", "run-a") is None
    assert private_dirs.owned_root(mine.name, "run-a") is None  # relative
    assert private_dirs.owned_root(str(mine), "") is None

    candidates = [str(p) for p in (other_run, no_owner, link, outside, odd_name, mine)]
    assert private_dirs.remove_owned(candidates, "run-a") == [mine]
    assert not mine.exists()
    for path in (other_run, no_owner, outside, odd_name):
        assert path.is_dir() and not path.is_symlink(), path
    assert link.is_symlink()
