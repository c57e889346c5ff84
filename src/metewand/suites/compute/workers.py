"""The implementation worker an attempt runs on: process, accounting, startup measurement.

Without worker reuse each attempt gets a fresh one; with reuse one worker serves a unit's
warm-ups and repetitions until it fails or the unit ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

from metewand.measure import forms, procfs
from metewand.measure.forms import Measurement, Reason, Status
from metewand.suites.compute.payload import AccountingBackend
from metewand.suites.compute.session import LaunchSpec, WorkerSession
from metewand.suites.compute.tree_memory import TreeMemory

# The platform the accounting runs on; /proc and cgroups exist only on Linux (tests replace it to
# stand for another POSIX system, which this host cannot become on demand).
PLATFORM = sys.platform
Opener = Callable[[str, str], Any]  # (backend, label) -> TreeAccounting


def _open_accounting(
    backend: str, label: str, opener: Opener
) -> tuple[Any, str | None, Reason | None]:
    """(accounting, why there is none, the resource reason to publish when there is none)."""
    if not PLATFORM.startswith("linux"):
        return None, f"{PLATFORM}: no /proc or cgroup accounting", Reason.UNSUPPORTED
    if backend == "none":
        return None, "accounting disabled", Reason.ACCOUNTING_UNAVAILABLE
    try:
        return opener(backend, label), None, None
    except Exception as exc:  # no backend usable here: resources become unavailable
        return None, f"{type(exc).__name__}: {exc}", Reason.ACCOUNTING_UNAVAILABLE


class Containment:
    """Opens the accounting group each process tree metewand starts runs in.

    Every tree — implementation, evaluator, materializer, build command — gets its own group, so
    a daemon it leaves (``setsid``, ``&``) is killed with it. ``announce`` hears each group's
    path before it is made (the run's crash record, ``runtime.owned``); an explicit ``opener``
    (tests) replaces how the accounting is opened.
    """

    def __init__(
        self,
        backend: str = "auto",
        announce: Callable[[str], None] | None = None,
        opener: Opener | None = None,
    ) -> None:
        self.backend = backend
        self.announce = announce
        self.opener: Opener = opener or self._announcing_opener

    def _announcing_opener(self, backend: str, label: str) -> Any:
        from metewand.measure.accounting import open_accounting

        return open_accounting(backend, label=label, announce=self.announce)

    def open(self, label: str, measuring: bool = True) -> tuple[Any, str | None, Reason | None]:
        """(accounting or None, why none, the reason to publish). ``measuring=False``: the group
        only contains the tree (evaluators, builds), so ``--backend none`` still gets one."""
        backend = "auto" if self.backend == "none" and not measuring else self.backend
        return _open_accounting(backend, f"mw-{os.getpid()}-{label}", self.opener)


class ImplementationWorker:
    def __init__(
        self,
        accounting_backend: str = "auto",
        log_limit: int = 1 << 20,
        on_start: Callable[[WorkerSession], None] | None = None,
        opener: Opener | None = None,
        containment: Containment | None = None,
    ) -> None:
        # How accounting is opened (tests pass a real but reduced opener) and recorded.
        self.containment = containment or Containment(accounting_backend, opener=opener)
        self.on_start = on_start  # told of every process started (implementation, evaluator)
        self.accounting_backend = accounting_backend
        self.log_limit = log_limit
        self.session: WorkerSession = None  # type: ignore[assignment]
        self.accounting: Any = None
        self.accounting_error: str | None = None
        self.missing_reason: Reason | None = None  # why resources are unavailable (no accounting)
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

    def start(
        self,
        spec: LaunchSpec,
        hello_timeout_s: float,
        before_launch: Callable[[Any], None] | None = None,
    ) -> None:
        """``before_launch`` hears the accounting (or None) once its group exists, before the
        process is launched (the attempt's phase clock begins there)."""
        self.accounting, self.accounting_error, self.missing_reason = self.containment.open(
            f"{id(self):x}"
        )
        if before_launch is not None:
            before_launch(self.accounting)
        log_dir = os.path.join(spec.cwd, "logs")
        self.session = WorkerSession(
            spec, log_dir, self.log_limit, self.accounting, on_start=self.on_start
        )
        self.cpu_before = None
        self.session.start()
        self.session.hello(hello_timeout_s)

    def launch_evaluator(self, spec: LaunchSpec, attempt_dir: str) -> WorkerSession:
        logs = os.path.join(attempt_dir, "logs")
        accounting = self.containment.open(f"eval-{id(self):x}", measuring=False)[0]
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


def process_high_water(pid: int | None) -> Measurement:
    """The document's peak_rss_bytes: VmHWM of the implementation process itself.

    Always partial ``process_only`` (descendants are not in it); a process that has exited (or a
    zombie, which has no address space left) gives ``accounting_unavailable``.
    """
    if pid is None:
        return forms.unavailable(Reason.NOT_STARTED)
    try:
        status = procfs.read_status(pid)
    except PermissionError:
        return forms.unavailable(Reason.PERMISSION_DENIED)
    except (procfs.ProcessGone, OSError):
        return forms.unavailable(Reason.ACCOUNTING_UNAVAILABLE)
    if status.vm_hwm_bytes is None:
        return forms.unavailable(Reason.ACCOUNTING_UNAVAILABLE)
    return forms.partial(status.vm_hwm_bytes, Reason.PROCESS_ONLY)


def read_resources(
    worker: ImplementationWorker, interrupted: bool
) -> tuple[Measurement, Measurement, TreeMemory]:
    """CPU across the selected envelope, the implementation process's VmHWM, and the kernel's
    memory high-water of the whole tree (cgroup backends only)."""
    acc = worker.accounting
    backend = AccountingBackend(acc.backend)
    cpu = _resource(acc.cpu().total, worker.cpu_before, interrupted)
    exited = worker.session is None or worker.session.returncode() is not None
    if acc.backend == "proc":  # /proc never proves complete tree accounting
        if exited:  # the tree walk finds nothing: an old reading would make a false delta
            cpu = forms.unavailable(Reason.ACCOUNTING_UNAVAILABLE)
        elif cpu.status is Status.COMPLETE and cpu.value is not None:
            cpu = forms.partial(cpu.value, Reason.PROCESS_ONLY)
        tree = forms.unavailable(Reason.UNSUPPORTED)
    else:
        tree = _resource(acc.memory().peak, None, interrupted)
        if tree.status is Status.UNAVAILABLE and tree.reason not in TREE_REASONS:
            tree = forms.unavailable(Reason.ACCOUNTING_UNAVAILABLE)
    pid = None if worker.session is None else worker.session.pid
    rss = forms.unavailable(Reason.ACCOUNTING_UNAVAILABLE) if exited else process_high_water(pid)
    return cpu, rss, TreeMemory(tree, backend)


TREE_REASONS = frozenset(
    {Reason.UNSUPPORTED, Reason.PERMISSION_DENIED, Reason.OUT_OF_RANGE, Reason.NOT_STARTED}
)
