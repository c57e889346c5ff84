"""One worker process: launch with the protocol pipes, log capture, hello, calls, teardown.

The worker runs in its own session (process group) and, when the caller passes a
``TreeAccounting``, joins the accounting groups before exec so nothing it forks escapes the
accounting or the final kill: through ``measure.gate`` where the accounting has groups, else with
``preexec_join``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from metewand.measure import gate
from metewand.measure.process import Process
from metewand.suites.compute.protocol import (
    PROTOCOL_VERSION,
    Channel,
    ProtocolViolation,
)

DEFAULT_LOG_LIMIT = 1 << 20
KILL_WAIT_S = 5.0  # KILL is not ignorable: this only bounds an uninterruptible sleep
# Variables a worker inherits; everything else is dropped so runs do not depend on the shell.
ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "OMP_NUM_THREADS",
)


class Accounting(Protocol):
    """What the session needs from ``metewand.measure.accounting.TreeAccounting``."""

    def preexec_join(self) -> Callable[[], None] | None: ...

    def attach(self, pid: int) -> None: ...

    def kill(self) -> None: ...

    def close(self) -> None: ...


@dataclass
class LaunchSpec:
    argv: list[str]
    role: str  # implementation | dataset_materializer | dataset_transformer | problem_evaluator
    worker_id: str
    cwd: str
    env: dict[str, str] = field(default_factory=dict)
    capabilities: tuple[str, ...] = ()
    # "pipes": two dedicated descriptors named by METEWAND_PROTOCOL_READ_FD/_WRITE_FD, stdout
    # and stderr are logs; "stdio": the protocol on stdin/stdout, stderr the only log.
    transport: str = "pipes"
    resolved: dict[str, Any] = field(default_factory=dict)  # the resolved worker's fields


class LogCapture:
    """Drains one stream to a file, keeping at most ``limit`` bytes and counting the rest."""

    def __init__(self, stream: Any, path: str, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.total_bytes = 0
        self.truncated = False
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream: Any) -> None:
        with open(self.path, "wb") as out:
            while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
                keep = max(0, self.limit - self.total_bytes)
                out.write(chunk[:keep])
                self.total_bytes += len(chunk)
                self.truncated = self.truncated or len(chunk) > keep
        stream.close()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def summary(self) -> dict[str, Any]:
        return {
            "path": os.path.basename(self.path),
            "total_bytes": self.total_bytes,
            "retained_bytes": min(self.total_bytes, self.limit),
            "truncated": self.truncated,
        }


def worker_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOWLIST}
    env.update(extra)
    return env


class WorkerSession:
    def __init__(
        self,
        spec: LaunchSpec,
        log_dir: str,
        log_limit: int = DEFAULT_LOG_LIMIT,
        accounting: Accounting | None = None,
        on_start: Callable[[WorkerSession], None] | None = None,
        owns_accounting: bool = False,
    ) -> None:
        """``owns_accounting``: the groups exist for this one process tree and are removed when
        it is killed (an evaluator's or materializer's; an implementation's outlive a kill so
        its final readings can be taken)."""
        self.spec = spec
        self.owns_accounting = owns_accounting
        self.on_start = on_start  # e.g. SessionRegistry.started: the run can kill it
        self.log_dir = log_dir
        self.log_limit = log_limit
        self.accounting = accounting
        self.proc: Process | None = None
        self.channel: Channel | None = None
        self.hello_reply: dict[str, Any] | None = None
        self._logs: list[LogCapture] = []

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        """Launch the process; raises OSError when it cannot start."""
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        env = worker_env(self.spec.env)
        stdio = self.spec.transport == "stdio"
        if not stdio:
            env["METEWAND_PROTOCOL_READ_FD"] = str(req_r)
            env["METEWAND_PROTOCOL_WRITE_FD"] = str(resp_w)
        # Through measure.gate where there are groups: a preexec_fn join forks all of metewand
        # (copy-on-write faults in this process afterwards), the gate's shell is vforked.
        common: dict[str, Any] = {
            "env": env,
            "cwd": self.spec.cwd,
            "pass_fds": () if stdio else (req_r, resp_w),
            "stdout": resp_w if stdio else subprocess.PIPE,
            "stderr": subprocess.PIPE,
        }
        # over stdio the worker's stdin is the request pipe: the gate line goes first on it;
        # otherwise the gate gives it a stdin of its own (end of file after the line)
        stdin = req_r if stdio else None
        accounting = self.accounting
        groups = accounting if gate.can_join(accounting) else None
        try:
            if groups is not None:
                self.proc = gate.start_joined(self.spec.argv, groups, stdin=stdin, **common)
            else:
                join = accounting.preexec_join() if accounting is not None else None
                stdin = subprocess.DEVNULL if stdin is None else stdin
                self.proc = Process.start(self.spec.argv, stdin=stdin, join=join, **common)
        except BaseException:
            for fd in (req_r, req_w, resp_r, resp_w):
                os.close(fd)
            raise
        os.close(req_r)
        os.close(resp_w)
        if groups is None and accounting is not None:
            accounting.attach(self.proc.pid)  # the /proc backend walks from this root
        elif groups is not None and stdio:
            os.write(req_w, gate.GATE_LINE)  # in its groups now: let it exec
        self.channel = Channel(resp_r, req_w)
        channel = self.channel
        # The worker's own exit (not its pipes' end of file) tells the channel it is gone.
        self.proc.on_exit(lambda proc: channel.worker_exited(proc.exit_status_unreaped()))
        os.makedirs(self.log_dir, exist_ok=True)
        self._logs = [
            self._capture(stream, name)
            for stream, name in (
                (self.proc.popen.stdout, "stdout"),
                (self.proc.popen.stderr, "stderr"),
            )
            if stream is not None
        ]
        if self.on_start is not None:
            self.on_start(self)

    def _capture(self, stream: Any, name: str) -> LogCapture:
        path = os.path.join(self.log_dir, f"{self.spec.role}.{name}")
        return LogCapture(stream, path, self.log_limit)

    def hello(self, timeout_s: float) -> dict[str, Any]:
        reply = self.call(
            "hello",
            {
                "protocols": [PROTOCOL_VERSION],
                "role": self.spec.role,
                "worker_id": self.spec.worker_id,
            },
            timeout_s,
        )
        _check_hello(reply, self.spec)
        self.hello_reply = reply
        return reply

    def call(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self.channel is not None, "session not started"
        return self.channel.request(method, params, timeout_s)

    def shutdown(self, timeout_s: float) -> int | None:
        """Ask politely, wait for exit; kill whatever remains. Returns the exit status."""
        try:
            if self.channel is not None and not self.channel.broken:
                self.call("shutdown", {}, timeout_s)
                self.channel.close()
                return self.wait(timeout_s)
        except Exception:  # shutdown trouble never changes an attempt's outcome
            pass
        finally:
            self.kill()
        return self.returncode()

    def wait(self, timeout_s: float) -> int | None:
        """The exit status once the process exits within ``timeout_s``, else None."""
        if self.proc is None:
            return None
        return self.proc.wait(timeout_s)

    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc else None

    def kill(self) -> None:
        """Kill the whole tree (accounting group and process group) and reap the root."""
        if self.proc is None:  # never started: an owned group made for it still goes
            if self.owns_accounting and self.accounting is not None:
                with contextlib.suppress(Exception):
                    self.accounting.close()
            return
        if self.accounting is not None:
            with contextlib.suppress(Exception):
                self.accounting.kill()
        self.proc.kill(KILL_WAIT_S)
        self.proc.close()
        if self.owns_accounting and self.accounting is not None:
            with contextlib.suppress(Exception):
                self.accounting.close()  # kills what is left in the groups, then removes them
        if self.channel is not None:
            self.channel.close()
        deadline = time.monotonic() + 2
        for capture in self._logs:
            capture.join(max(0.0, deadline - time.monotonic()))

    def logs(self) -> dict[str, Any]:
        return {os.path.basename(c.path).split(".")[-1]: c.summary() for c in self._logs}


def shutdown_concurrently(sessions: list[WorkerSession], timeout_s: float) -> None:
    """Shut several workers down at once: the cost is the slowest exit, not the sum."""
    for never_started in (s for s in sessions if s.proc is None):
        never_started.kill()  # releases a group made for it
    live = [s for s in sessions if s.proc is not None]
    if len(live) <= 1:
        for session in live:
            session.shutdown(timeout_s)
        return
    threads = [
        threading.Thread(target=s.shutdown, args=(timeout_s,), name="mw-shutdown") for s in live[1:]
    ]
    for thread in threads:
        thread.start()
    live[0].shutdown(timeout_s)
    for thread in threads:
        thread.join()


def _check_hello(reply: dict[str, Any], spec: LaunchSpec) -> None:
    if reply.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolViolation("wrong_protocol_version", f"worker chose {reply.get('protocol')!r}")
    if reply.get("worker_id") != spec.worker_id:
        raise ProtocolViolation("worker_id_mismatch", "hello did not echo the worker id")
    if "sdk" not in reply or not (reply["sdk"] is None or isinstance(reply["sdk"], dict)):
        raise ProtocolViolation("malformed_message", "hello reply needs sdk (object or null)")
    capabilities = reply.get("capabilities")
    if not isinstance(capabilities, list):
        raise ProtocolViolation("malformed_message", "hello reply needs a capabilities list")
    missing = [c for c in spec.capabilities if c not in capabilities]
    if missing:
        raise ProtocolViolation("capability_not_reported", ", ".join(missing))
