"""The private directory each engine launch gets, and the guarded removal of one left behind.

Every launch gets one fresh ``<tempdir>/metewand-<engine>-XXXXXXXX`` root holding:

- ``profile/``: Chrome's ``--user-data-dir`` (engines that take one);
- ``tmp/``: the engine's ``TMPDIR``. Chromium creates its ``org.chromium.Chromium.XXXXXX``
  singleton dir under ``TMPDIR`` and removes it only on a clean shutdown, which a signalled
  engine never has; inside the root it goes away with the root;
- ``.metewand-owner``: the run id the engine was launched for (empty outside a run).

``EngineProcess.stop()`` removes the root. A runner killed with ``kill -9`` never gets there: its
watchdog (``measure.watchdog.guard_dir``) removes the roots it was told of once the engines are
killed, and, should the watchdog die with it, the roots are recorded in ``engine_pids.jsonl``
and removed by ``leftovers`` on ``--resume``.
That removal trusts nothing it reads: ``owned_root`` accepts only a real (non-symlink) directory
directly in the temp dir, named with metewand's pattern, whose owner file names the run being
resumed (a root made while the runner had another ``TMPDIR`` is left alone: never guess).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

PREFIX: Final = "metewand-"
OWNER_FILE: Final = ".metewand-owner"
PROFILE_DIR: Final = "profile"
TMP_DIR: Final = "tmp"
# mkdtemp's random part is drawn from [a-z0-9_]; engine names are registry keys.
_ROOT_NAME: Final = re.compile(r"metewand-[a-z][a-z0-9_]*-[a-z0-9_]{6,}")


def make_root(engine: str, owner: str) -> Path:
    """A new private root for one launch of ``engine`` with its ``tmp/`` and owner file."""
    root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{engine}-"))
    (root / TMP_DIR).mkdir()
    (root / OWNER_FILE).write_text(owner)
    return root


def owned_root(path: str, run_id: str) -> Path | None:
    """``path`` as a Path when it is a private root this run created and may remove, else None."""
    if not run_id or not os.path.isabs(path) or os.path.realpath(path) != path:
        return None  # relative, '..', or a symlink somewhere on the way
    root = Path(path)
    if root.parent != Path(os.path.realpath(tempfile.gettempdir())):
        return None  # make_root only ever creates roots directly in the temp dir
    if not _ROOT_NAME.fullmatch(root.name) or not _is_real(root, stat.S_ISDIR):
        return None
    owner = root / OWNER_FILE
    if not _is_real(owner, stat.S_ISREG):
        return None
    try:
        return root if owner.read_text() == run_id else None
    except (OSError, UnicodeDecodeError):
        return None


def remove_owned(paths: list[str], run_id: str) -> list[Path]:
    """Remove every path in ``paths`` that ``owned_root`` accepts; returns those removed."""
    removed = []
    for path in dict.fromkeys(paths):
        root = owned_root(path, run_id)
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
            if not root.exists():
                removed.append(root)
    return removed


def _is_real(path: Path, kind: Callable[[int], bool]) -> bool:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return kind(mode)
