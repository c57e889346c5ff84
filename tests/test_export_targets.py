"""A path given to ``measure --export-*`` or ``export -o`` is written through or refused, never
replaced: a character device stays a device, a symbolic link stays a link, a FIFO stays a FIFO
(and its reader gets the data), and a directory that takes no file (``/proc``) is refused with
exit 2 before any run. Real processes; device nodes are made in the test's own directory (a
test must not be able to damage ``/dev/full`` of the shared host if the code is wrong)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from metewand.runtime.store import RunStore

METEWAND = str(Path(sys.executable).with_name("metewand"))
NULL, FULL = os.makedev(1, 3), os.makedev(1, 7)


def _run_dir(tmp_path: Path) -> Path:
    if not (tmp_path / "r1").exists():
        with RunStore.create(tmp_path, "r1", {"planned_keys": ["a/0"]}) as store:
            store.append({"key": "a/0", "status": "pass", "attempt": 0})
    return tmp_path / "r1"


def _export(tmp_path: Path, target: Path | str) -> subprocess.CompletedProcess[str]:
    argv = [METEWAND, "export", str(_run_dir(tmp_path)), "--format", "jsonl", "-o", str(target)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def _measure(tmp_path: Path, target: Path | str) -> subprocess.CompletedProcess[str]:
    argv = [
        METEWAND,
        "measure",
        "--runs",
        "2",
        "--export-json",
        str(target),
        "--",
        "touch",
        str(tmp_path / "ran"),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


WRITERS: dict[str, Callable[[Path, Path | str], subprocess.CompletedProcess[str]]] = {
    "export -o": _export,
    "measure --export-json": _measure,
}
writers = pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS.keys())


def _device(path: Path, number: int) -> Path:
    os.mknod(path, stat.S_IFCHR | 0o666, number)
    return path


def _is_device(path: Path, number: int) -> bool:
    info = os.lstat(path)
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == number


@writers
def test_a_device_is_written_through_never_replaced(write: Callable, tmp_path: Path) -> None:
    null = _device(tmp_path / "null", NULL)
    done = write(tmp_path, null)
    assert done.returncode == 0, done.stderr
    assert _is_device(null, NULL)
    full = _device(tmp_path / "full", FULL)  # every write fails: ENOSPC
    done = write(tmp_path, full)
    assert done.returncode == 2, done.stderr
    assert "cannot be written (No space left on device)" in done.stderr
    assert "Traceback" not in done.stderr and str(full) in done.stderr
    assert _is_device(full, FULL)


@writers
def test_a_symlink_stays_a_link_and_its_target_gets_the_data(
    write: Callable, tmp_path: Path
) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    done = write(tmp_path, link)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() not in ("", "old")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@writers
def test_a_fifo_is_written_through_to_its_reader(write: Callable, tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = write(tmp_path, fifo)
    reader.join(30)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].strip().startswith((b"{", b"["))


@writers
@pytest.mark.parametrize("where", ["/proc/metewand-x.json", "DIR", "DIR/missing/x.json"])
def test_a_path_that_cannot_take_a_file_is_refused_before_anything_runs(
    write: Callable, where: str, tmp_path: Path
) -> None:
    target = where.replace("DIR", str(tmp_path))
    done = write(tmp_path, target)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and target in done.stderr
    assert not (tmp_path / "ran").exists()  # measure refused before its first run
    assert not Path(target).is_file()
