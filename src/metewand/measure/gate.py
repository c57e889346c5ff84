"""Start a command that joins its accounting groups before exec, without forking the caller.

``subprocess`` can join a child to its groups before exec only through a ``preexec_fn``, and a
``preexec_fn`` forces a full ``fork`` of the caller. For a harness with a large heap that is
expensive: the page tables are copied, and then every page that Python's reference counting
writes takes a copy-on-write fault in the parent. With an 80 MB heap here a spawn cost the
parent ~29 ms of CPU, against ~0.9 ms for the ``vfork`` that ``subprocess`` uses without
one (``benchmarks/README.md``, "the adapter spawn").

The gate starts ``/bin/sh`` by ``vfork``. The shell blocks reading one line from its stdin. The
caller moves the shell's pid into the groups, then writes ``GATE_LINE`` before the command's own
input, and the shell execs the command. The command's first instruction, and everything it
forks, run inside the groups. The groups are charged only the shell's read and its exec. The
shell's start-up before the move is charged to the caller's tree, as a fork's would be. The
shell reads its line a byte at a time from a pipe (POSIX ``read``), so the command's stdin starts
right after it. If the caller dies before the line, stdin ends and the shell exits 126 without
running the command.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from metewand.measure.accounting import CgroupAccounting, TreeAccounting
from metewand.measure.process import Process
from metewand.measure.spawner import resolve_executable

SHELL = "/bin/sh"
GATE_LINE = b"go\n"
GATE_EXIT = 126  # the shell's status when its stdin ended before the gate line
_SCRIPT = f'read -r gate && [ "$gate" = go ] && exec "$@"; exit {GATE_EXIT}'


@functools.cache  # a fact of the host, asked at every spawn
def unavailable_reason() -> str | None:
    """None where a gate can start here, else why not (callers then fork with a preexec_fn)."""
    if not os.access(SHELL, os.X_OK):
        return f"{SHELL} is not an executable file"
    return None


def can_join(accounting: object) -> TypeGuard[CgroupAccounting]:
    """Whether a command measured by ``accounting`` can start through the gate: there are
    groups to move it into, and a shell to gate it."""
    return isinstance(accounting, CgroupAccounting) and unavailable_reason() is None


def gated_argv(
    argv: Sequence[str], env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None
) -> list[str]:
    """The shell's argv that runs ``argv`` once the gate line arrives. The program is found
    here, as ``subprocess`` would find it, so a missing one still fails the start with
    FileNotFoundError (or PermissionError) instead of a shell's exit 127."""
    program = argv[0]
    if os.sep in program:
        where = os.path.join(os.fspath(cwd), program) if cwd is not None else program
        if not os.path.isfile(where):
            raise FileNotFoundError(2, "No such file or directory", program)
        if not os.access(where, os.X_OK):
            raise PermissionError(13, "Permission denied", program)
    else:
        program = resolve_executable(program, env)
    return [SHELL, "-c", _SCRIPT, "metewand-gate", program, *argv[1:]]


def start_held(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    stdin: Any,
    **start: Any,
) -> Process:
    """The gate shell for ``argv``, started and held before the command: the caller moves it
    into its groups (``accounting.attach(pid)``, which may be done on another thread: the
    first move into a cgroup after a quiet while waits for an RCU grace period, ~10 ms here),
    then writes ``GATE_LINE`` to ``stdin``, then the command's input.

    The shell is not guarded as a process of its own (``Process.started_by``): until the line
    it runs nothing, and a caller killed before writing it leaves its stdin at end of file, so
    it exits; once moved (before the line) it is inside groups the watchdog sweeps. A guard
    would cost each start two /proc reads and two pipe writes (~0.1 ms of CPU, ~0.6 ms of the
    caller's wall)."""
    return Process.start(
        gated_argv(argv, env, cwd), env=env, cwd=cwd, stdin=stdin, guarded=False, **start
    )


def start_joined(
    argv: Sequence[str],
    accounting: TreeAccounting,
    *,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    stdin: Any = None,
    **start: Any,
) -> Process:
    """Start ``argv`` through the gate and move it into ``accounting``'s groups (``can_join``
    must hold); ``start`` goes on to ``Process.start``. Without ``stdin`` the command gets a
    pipe of its own, which carries the line and then reads as end of file. With a ``stdin`` of
    the caller's, the caller writes ``GATE_LINE`` to it first, then the command's input. If the
    move fails, the shell is killed before it runs anything."""
    gate_r, gate_w = os.pipe() if stdin is None else (-1, -1)
    try:
        process = start_held(
            argv, env=env, cwd=cwd, stdin=gate_r if stdin is None else stdin, **start
        )
        try:
            accounting.attach(process.pid)
            if gate_w >= 0:
                os.write(gate_w, GATE_LINE)
        except BaseException:
            process.kill()
            raise
        return process
    finally:
        for fd in (gate_r, gate_w):
            if fd >= 0:
                os.close(fd)
