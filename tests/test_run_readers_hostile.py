"""Issue 27 item 5: every reader of a run directory takes regular files only and caps a line. A
FIFO named ``results.jsonl`` or ``run_manifest.json`` once blocked ``compare`` for good,
``results.jsonl`` linked to ``/dev/zero`` ended in MemoryError and a 1 GiB line cost 4.2 GB. Now
``status``, ``inspect``, ``report``, ``export``, ``compare`` and ``run --resume`` exit 2 naming the
file, at once, with bounded memory. Real ``metewand`` processes on a real finished run."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from compute_helpers import run
from metewand.runtime import rundir
from test_compute_hostile import hostile_manifest

READERS = {
    "status": ["status", "RUN"],
    "inspect": ["inspect", "RUN", "--key", "KEY"],
    "report": ["report", "RUN", "--format", "md", "--out", "OUT"],
    "export": ["export", "RUN", "--format", "csv"],
    "compare": ["compare", "RUN", "RUN"],
    "resume": ["run", "--resume", "RUN", "--host-telemetry", "off"],
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("readers")
    summary = run(hostile_manifest(tmp), tmp, host_sample_interval_s=None)
    return Path(summary.run_dir)


def _fifo(name: str) -> Callable[[Path], str]:
    def damage(run_dir: Path) -> str:
        (run_dir / name).unlink()
        os.mkfifo(run_dir / name)
        return f"{name}: not a regular file (a FIFO)"

    return damage


def _link_to_dev_zero(run_dir: Path) -> str:
    (run_dir / "results.jsonl").unlink()
    (run_dir / "results.jsonl").symlink_to("/dev/zero")
    return "results.jsonl: a symbolic link out of the run directory"


def _long_line(run_dir: Path) -> str:
    with (run_dir / "results.jsonl").open("ab") as handle:
        handle.write(b'{"key": "' + b"x" * (rundir.LINE_LIMIT + 10) + b'"}\n')
    return f"results.jsonl:2: a line longer than {rundir.LINE_LIMIT} bytes"


DAMAGE: dict[str, Callable[[Path], str]] = {
    "results_fifo": _fifo("results.jsonl"),
    "manifest_fifo": _fifo("run_manifest.json"),
    "results_dev_zero": _link_to_dev_zero,
    "results_long_line": _long_line,
}
# every reader meets the FIFO; the other damages go through the same opening, seen by two
CASES = [
    (d, r) for d in DAMAGE for r in READERS if d == "results_fifo" or r in ("report", "resume")
]


def _reader_limited() -> None:
    # a reader that slurped the link to /dev/zero or the long line would hit this at once
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("damage", "reader"), CASES)
def test_a_reader_refuses_a_run_file_that_is_not_a_bounded_regular_file(
    finished_run: Path, tmp_path: Path, damage: str, reader: str
) -> None:
    run_dir = tmp_path / finished_run.name
    subprocess.run(["cp", "-a", str(finished_run), str(run_dir)], check=True)
    key = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])["key"]
    where = DAMAGE[damage](run_dir)
    argv = [
        a.replace("RUN", str(run_dir)).replace("KEY", key).replace("OUT", str(tmp_path / "o"))
        for a in READERS[reader]
    ]
    done = subprocess.run(
        [sys.executable, "-m", "metewand", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        preexec_fn=_reader_limited,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert where in done.stderr, done.stderr
