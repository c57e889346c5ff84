"""The name a Dask worker gives its host in every row's ``placement`` and its registration.

``socket.gethostname()``, unless ``METEWAND_WORKER_HOST`` names the host otherwise: hosts whose
own name says nothing (containers with random names) can be named by the operator, and a test
can run two workers on loopback that stand for two hosts (the per-host reports and the rule that
rows of different hosts are never pooled silently are then exercised on real workers).
"""

from __future__ import annotations

import os
import socket

HOST_ENV = "METEWAND_WORKER_HOST"


def worker_host() -> str:
    return os.environ.get(HOST_ENV) or socket.gethostname()
