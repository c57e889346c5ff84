"""``--executor local|dask``, ``--scheduler`` and ``--dask-local``: one meaning for ``metewand run``
and ``metewand browser run`` (docs/dask.md).

Flags that disagree exit 2 before anything exists; ``--executor dask`` without the optional extra
installed exits 3.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click

from metewand.cli import exit_codes
from metewand.runtime import rundir

if TYPE_CHECKING:
    from metewand.runtime.run import ExecutorChoice


def executor_options(local_help: str) -> Callable[[Any], Any]:
    """The three options, ``local_help`` saying what the local executor does for the command."""

    def decorate(command: Any) -> Any:
        command = click.option(
            "--dask-local",
            type=click.IntRange(min=1, max=MAX_LOCAL_WORKERS),
            default=None,
            metavar="N",
            help="Start a local Dask cluster of N single-threaded worker processes for this run "
            f"(at most {MAX_LOCAL_WORKERS}).",
        )(command)
        command = click.option(
            "--scheduler", default=None, metavar="tcp://HOST:PORT", help="Running Dask scheduler."
        )(command)
        return click.option(
            "--executor",
            type=click.Choice(["local", "dask"]),
            default="local",
            show_default=True,
            help=f"local: {local_help}; dask: whole units on a Dask cluster "
            "(needs --scheduler or --dask-local; docs/dask.md).",
        )(command)

    return decorate


# a worker is a whole Python process (~100 MB) running one unit at a time: more than this on one
# machine measures nothing but the machine's contention
MAX_LOCAL_WORKERS = 64


def scheduler_problem(address: str) -> str | None:
    """Why ``address`` is not a ``tcp://HOST:PORT`` a client can connect to (None: it is)."""
    expected = f"--scheduler {address}: expected tcp://HOST:PORT"
    if not address.startswith("tcp://"):
        return expected
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError as exc:  # a port that is no number, an unclosed [IPv6
        return f"{expected} ({exc})"
    if not parts.hostname or not port:
        return f"{expected} (no {'host' if not parts.hostname else 'port'})"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return f"{expected} (nothing may follow the port)"
    return None


def check_executor(
    executor: str, scheduler: str | None, local: int | None, jobs_given: bool
) -> ExecutorChoice:
    """The executor the flags choose, once they agree and ``dask`` is installed (exit 2 / exit 3
    otherwise). ``jobs_given``: ``--jobs`` was on the command line (it is the local executor's)."""
    from metewand.runtime.run import ExecutorChoice

    problem = None
    if executor == "local" and (scheduler is not None or local is not None):
        problem = "--scheduler and --dask-local need --executor dask"
    elif executor == "dask" and (scheduler is None) == (local is None):
        problem = (
            "--executor dask needs exactly one of --scheduler tcp://HOST:PORT and --dask-local N"
        )
    elif executor == "dask" and jobs_given:
        problem = (
            "--jobs is the local executor's; with --executor dask each worker runs one unit "
            "at a time"
        )
    elif scheduler is not None:
        problem = scheduler_problem(scheduler)
    if problem:
        click.echo(f"error: {problem}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    if executor == "dask":
        try:
            import distributed  # noqa: F401
        except ImportError:
            click.echo(
                "error: --executor dask needs the dask extra: pip install 'metewand[dask]'",
                err=True,
            )
            sys.exit(exit_codes.ENVIRONMENT_MISSING)
    return ExecutorChoice(executor, scheduler, local)


def print_hosts(run_dir: str | Path, echo: Callable[[str], None] = click.echo) -> None:
    """``--executor dask``: this session's rows per host and worker, and the lost tries."""
    hosts = rundir.read_json(Path(run_dir) / rundir.DASK_HOSTS)
    if not isinstance(hosts, dict) or hosts.get("describes_latest_session") is False:
        return
    for worker in sorted(hosts["workers"], key=lambda w: str(w.get("worker_name"))):
        verdict = "accepted" if worker["accepted"] else f"refused: {worker['reason']}"
        echo(
            f"dask worker {worker.get('worker_name', '?')} ({worker['worker']}) on "
            f"{worker.get('host', '?')}: {worker['rows']} rows, {worker['lost_tries']} "
            f"lost tries; {verdict}"
        )
    per_host = ", ".join(f"{host} {n}" for host, n in sorted(hosts["rows_by_host"].items()))
    echo(f"rows per host: {per_host or 'none'}; lost tries: {hosts['lost_tries']}")
