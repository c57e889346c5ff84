"""The name a Dask worker gives its host in every row's ``placement`` and its registration.

``socket.gethostname()``, unless ``METEWAND_WORKER_HOST`` names the host otherwise: hosts whose
own name says nothing (containers with random names) can be named by the operator, and a test
can run two workers on loopback that stand for two hosts (the per-host reports and the rule that
rows of different hosts are never pooled silently are then exercised on real workers).

A worker's *place* is where its rows were measured: its host, or ``host/worker-name`` when the
run's workers share one host (a LocalCluster of several workers). A worker process has one
place, set by the worker plugin when it registers (``set_worker_place``).
"""

from __future__ import annotations

import os
import socket

HOST_ENV = "METEWAND_WORKER_HOST"


_place: str | None = None


def worker_host() -> str:
    return os.environ.get(HOST_ENV) or socket.gethostname()


def set_worker_place(place: str | None) -> None:
    """This worker process's place (None: its host)."""
    global _place
    _place = place


def worker_place() -> str:
    return _place or worker_host()
