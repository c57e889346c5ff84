"""A run directory as another process of the same run sees it (a Dask worker, issue #14).

The client holds the run store (its lock, its rows, its manifest). A worker on the client's machine
(``--dask-local``) or on a filesystem shared with it still has to publish each attempt's artifacts
before the client writes the attempt's row. ``SharedRunView`` gives it exactly that: the read-only
view of the run, plus ``artifact_dir`` with the store's own staging-and-rename rule (a directory
appears under ``artifacts/<key>`` whole or not at all). It never takes the lock and never writes
rows or the manifest: those stay the client's.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from metewand.runtime.store import RunView, staged_artifact_dir


class SharedRunView(RunView):
    def artifact_dir(self, key: str) -> contextlib.AbstractContextManager[Path]:
        # the very routine the store uses: it needs only the directory, not the lock nor the
        # store's group commit (the rename's parent is synced at once)
        return staged_artifact_dir(self, key, None)
