"""What the client asks the Dask scheduler itself (``Client.run_on_scheduler``).

A scheduler needs only ``distributed``: it may run in a Python without metewand (an operator's
``dask scheduler`` from another environment). So this module imports nothing of metewand, and
``dask_executor`` registers it with cloudpickle *by value*: its functions travel as code, not as
a reference to a module the scheduler would have to import.
"""

from __future__ import annotations

from typing import Any


def gate_workers(resource: str, dask_scheduler: Any = None) -> int:
    """How many live workers hold ``resource`` (the run's accepted workers)."""
    workers = dask_scheduler.workers.values() if dask_scheduler else ()
    return sum(1 for ws in workers if resource in ws.resources)


def connected_clients(dask_scheduler: Any = None) -> list[str]:
    """The ids of the clients connected to the scheduler now."""
    return list(dask_scheduler.clients) if dask_scheduler else []


def cannot_load(module: str, dask_scheduler: Any = None) -> str | None:
    """Why the scheduler cannot import ``module`` (it unpickles the run's tasks, which name
    metewand's task functions), or None."""
    import importlib

    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure to import is the answer
        return f"{type(exc).__name__}: {exc}"
    return None
