"""Issue 12 items 11, 12, 15: damaged run directories and caches.

One reading rule for every reader (``runtime.store.read_results`` / ``read_run_manifest``): a
corrupt middle line, a duplicated row or a corrupt ``run_manifest.json`` makes ``status``,
``export``, ``inspect`` and ``report`` exit 2 naming the file (and line), never a traceback and
never a row counted twice. A dataset staging dir left by a killed materialization is removed by
the next run; one a live process is filling is not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from compute_helpers import run
from test_compute_hostile import hostile_manifest

READERS = [
    ["status"],
    ["export", "--format", "csv"],
    ["inspect", "--key", "KEY"],
    ["report", "--format", "md,json"],
]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("damage")
    manifest = hostile_manifest(tmp)
    manifest.write_text(
        manifest.read_text().replace('name = "hostile"', 'name = "hostile"\nrepetitions = 3')
    )
    summary = run(manifest, tmp, host_sample_interval_s=None)
    assert len(summary.rows) == 3
    return Path(summary.run_dir)


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / run_dir.name
    subprocess.run(["cp", "-a", str(run_dir), str(target)], check=True)
    return target


def _middle_line_corrupt(run_dir: Path) -> str:
    lines = (run_dir / "results.jsonl").read_bytes().split(b"\n")
    lines[1] = lines[1][:40] + b"\xff}{" + lines[1][40:]
    (run_dir / "results.jsonl").write_bytes(b"\n".join(lines))
    return "results.jsonl:2"


def _duplicated_row(run_dir: Path) -> str:
    lines = (run_dir / "results.jsonl").read_bytes().split(b"\n")
    (run_dir / "results.jsonl").write_bytes(b"\n".join([*lines[:-1], lines[0], b""]))
    return "results.jsonl:4: duplicate row"


def _manifest_not_json(run_dir: Path) -> str:
    (run_dir / "run_manifest.json").write_bytes(b'{"schema": "metewand_run_manifest/1", \xfe')
    return "run_manifest.json"


def _manifest_truncated(run_dir: Path) -> str:
    text = (run_dir / "run_manifest.json").read_bytes()
    (run_dir / "run_manifest.json").write_bytes(text[: len(text) // 2])
    return "run_manifest.json"


DAMAGE: dict[str, Callable[[Path], str]] = {
    "middle_line": _middle_line_corrupt,
    "duplicate": _duplicated_row,
    "manifest_not_json": _manifest_not_json,
    "manifest_truncated": _manifest_truncated,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("reader", READERS, ids=lambda r: r[0])
def test_every_reader_names_the_damage_and_exits_2(
    finished_run: Path, tmp_path: Path, damage: str, reader: list[str]
) -> None:
    run_dir = _copy(finished_run, tmp_path)
    key = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])["key"]
    where = DAMAGE[damage](run_dir)
    argv = [a.replace("KEY", key) for a in reader]
    extra = ["--out", str(tmp_path / "out")] if reader[0] == "report" else []
    done = subprocess.run(
        [sys.executable, "-m", "metewand", argv[0], str(run_dir), *argv[1:], *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert where in done.stderr, done.stderr


def test_stale_dataset_staging_is_removed_and_a_live_one_kept(tmp_path: Path) -> None:
    from metewand.suites.compute.staging import prefix

    cache = tmp_path / "cache" / "datasets"
    cache.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = cache / "staging-abc123"  # the old naming, from a killed run
    stale_pid = cache / f"staging-{dead.pid}-1-xyz"  # its builder is gone
    live = cache / f"{prefix('staging')}live"  # this process is "materializing" into it
    acquiring = cache / f"acquire-{dead.pid}-1-xyz"  # an acquisition whose builder is gone
    for path in (stale, stale_pid, live, acquiring):
        (path / "data").mkdir(parents=True)
    summary = run(hostile_manifest(tmp_path, gen="ok"), tmp_path, host_sample_interval_s=None)
    assert summary.rows[0]["status"] == "accepted"
    assert not stale.exists() and not stale_pid.exists() and not acquiring.exists()
    assert live.exists()
    assert [p.name for p in cache.iterdir() if p.name.startswith("staging-")] == [live.name]


def test_export_to_an_unwritable_place_is_named_not_a_traceback(finished_run: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "export", str(finished_run), "-o", "/proc/metewand-x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "/proc/metewand-x" in done.stderr


@pytest.mark.parametrize("out", ["/proc/metewand-x", "{file}"])
def test_report_out_that_cannot_be_written_is_named(
    finished_run: Path, tmp_path: Path, out: str
) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x\n")
    out = out.replace("{file}", str(a_file))
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "report", str(finished_run), "--out", out],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and out in done.stderr
