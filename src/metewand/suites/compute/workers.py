"""The implementation worker an attempt runs on: process, accounting, startup measurement.

Without worker reuse each attempt gets a fresh one; with reuse one worker serves a unit's
warm-ups and repetitions until it fails or the unit ends.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from metewand.measure import forms
from metewand.measure.forms import Measurement, Reason, Status
from metewand.runtime.payload import AccountingBackend
from metewand.suites.compute.session import LaunchSpec, WorkerSession


class Containment:
    """Opens the accounting group each process tree metewand starts runs in.

    Every tree — implementation, evaluator, materializer, build command — gets its own group, so
    a daemon it leaves (``setsid``, ``&``) is killed with it. ``announce`` hears each group's
    path before it is made (the run's crash record, ``runtime.owned``).
    """

    def __init__(
        self, backend: str = "auto", announce: Callable[[str], None] | None = None
    ) -> None:
        self.backend = backend
        self.announce = announce

    def open(self, label: str, measuring: bool = True) -> tuple[Any, str | None]:
        """(accounting or None, why none). ``measuring=False``: the group only contains the
        tree (evaluators, builds), so ``--backend none`` still gets one where possible."""
        backend = self.backend
        if backend == "none":
            if measuring:
                return None, "accounting disabled"
            backend = "auto"
        try:
            from metewand.measure.accounting import open_accounting

            label = f"mw-{os.getpid()}-{label}"
            return open_accounting(backend, label=label, announce=self.announce), None
        except Exception as exc:  # no backend usable here: resources become unavailable
            return None, f"{type(exc).__name__}: {exc}"


class ImplementationWorker:
    def __init__(
        self,
        accounting_backend: str = "auto",
        log_limit: int = 1 << 20,
        on_start: Callable[[WorkerSession], None] | None = None,
        containment: Containment | None = None,
    ) -> None:
        self.on_start = on_start  # told of every process started (implementation, evaluator)
        self.accounting_backend = accounting_backend
        self.containment = containment or Containment(accounting_backend)
        self.log_limit = log_limit
        self.session: WorkerSession = None  # type: ignore[assignment]
        self.accounting: Any = None
        self.accounting_error: str | None = None
        self.startup: Measurement = forms.unavailable(Reason.NOT_STARTED)
        self.cpu_before: Measurement | None = None  # None: the lifetime from launch (zero)
        self.attempts_served = 0

    @property
    def alive(self) -> bool:
        return (
            self.session is not None
            and self.session.returncode() is None
            and not (self.session.channel is not None and self.session.channel.broken)
        )

    def start(self, spec: LaunchSpec, hello_timeout_s: float) -> None:
        self.accounting, self.accounting_error = self.containment.open(f"{id(self):x}")
        log_dir = os.path.join(spec.cwd, "logs")
        self.session = WorkerSession(
            spec, log_dir, self.log_limit, self.accounting, on_start=self.on_start
        )
        self.cpu_before = None
        self.session.start()
        self.session.hello(hello_timeout_s)

    def launch_evaluator(self, spec: LaunchSpec, attempt_dir: str) -> WorkerSession:
        logs = os.path.join(attempt_dir, "logs")
        accounting, _ = self.containment.open(f"eval-{id(self):x}", measuring=False)
        return WorkerSession(
            spec, logs, self.log_limit, accounting, on_start=self.on_start, owns_accounting=True
        )

    def cpu_baseline(self) -> None:
        if self.accounting is not None:
            self.cpu_before = self.accounting.cpu().total

    def backend(self) -> AccountingBackend:
        if self.accounting is None:
            return AccountingBackend.NONE
        return AccountingBackend(self.accounting.backend)

    def describe(self) -> dict[str, Any]:
        reply = self.session.hello_reply or {} if self.session else {}
        return {
            "pid": self.session.pid if self.session else None,
            "sdk": reply.get("sdk"),
            "capabilities": reply.get("capabilities"),
            "accounting_backend": self.backend().value,
            "accounting_fallback": list(getattr(self.accounting, "fallback_reasons", []) or [])
            + ([self.accounting_error] if self.accounting_error else []),
        }

    def logs(self) -> dict[str, Any]:
        return self.session.logs() if self.session else {}

    def exited_cleanly(self, wait_s: float = 1.0) -> bool:
        """After the stream closed: did the process exit with status 0 (an early exit)?"""
        return self.session is not None and self.session.wait(wait_s) == 0

    def discard(self) -> None:
        """Kill the whole tree and release the accounting groups."""
        if self.session is not None:
            self.session.kill()
        self._close_accounting()

    def finish(self, shutdown_timeout_s: float) -> None:
        if self.session is not None and self.alive:
            self.session.shutdown(shutdown_timeout_s)
        self.discard()

    def _close_accounting(self) -> None:
        if self.accounting is not None:
            with contextlib.suppress(Exception):
                self.accounting.close()
        self.accounting = None


def _resource(after: Measurement, before: Measurement | None, interrupted: bool) -> Measurement:
    if after.value is None:
        return after
    if before is not None and before.value is None:
        return before  # no baseline: the envelope's share cannot be known
    base = 0 if before is None or before.value is None else before.value
    value = max(0, after.value - base)
    weaker = after.status is Status.PARTIAL or (
        before is not None and before.status is not Status.COMPLETE
    )
    if weaker:
        return forms.partial(value, Reason.PROCESS_ONLY)
    if interrupted:
        return forms.partial(value, Reason.INTERRUPTED)
    return forms.complete(value)


def read_resources(
    worker: ImplementationWorker, interrupted: bool
) -> tuple[Measurement, Measurement]:
    """CPU across the selected envelope and the lifetime memory high-water mark."""
    acc = worker.accounting
    cpu = _resource(acc.cpu().total, worker.cpu_before, interrupted)
    peak = _resource(acc.memory().peak, None, interrupted)
    if acc.backend == "proc":  # /proc never proves complete tree accounting
        cpu, peak = (
            forms.partial(m.value, Reason.PROCESS_ONLY)
            if m.status is Status.COMPLETE and m.value is not None
            else m
            for m in (cpu, peak)
        )
    return cpu, peak
