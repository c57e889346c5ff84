"""Adopting the orphans of what this process launches (Linux's child subreaper).

When a process exits, the kernel hands its children to the nearest ancestor marked as a child
subreaper, or to init. An engine stopped by its session leaves helpers behind for a moment
(Chromium's zygotes, renderers, utility processes): with init as their reaper, their CPU moves
into init's ``cutime`` when init waits for them, and a process that lived and died between two
host samples is then seen by no one as the benchmark's. With this process as the subreaper,
their CPU moves into ours instead, where the foreign-CPU tracker follows it (``measure.foreign``:
a vanished member's CPU that reappears in a surviving member's).

An adopted child is this process's to reap: nothing else waits for it. ``reap_adopted`` waits
only for zombies this process never started. A child we start either stays in our session
(``subprocess`` without ``start_new_session``) or leads its own (``start_new_session``,
``measure.gate``); a process in another session that does not lead it can only be a descendant
of such a leader, adopted. So ``Popen`` and asyncio never see their own child reaped here.

Imports nothing above ``measure``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator

from metewand.measure import procfs

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: object) -> None:
    if _libc().prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl failed")


def is_subreaper() -> bool:
    value = ctypes.c_int(0)
    try:
        _prctl(PR_GET_CHILD_SUBREAPER, ctypes.pointer(value))
    except (OSError, AttributeError):
        return False
    return bool(value.value)


@contextlib.contextmanager
def adopting() -> Iterator[str | None]:
    """This process is a child subreaper inside the block (unless it already was, when it
    stays one). Yields None, or why it could not become one (then orphans go to init)."""
    already = is_subreaper()
    reason: str | None = None
    if not already:
        try:
            _prctl(PR_SET_CHILD_SUBREAPER, 1)
        except (OSError, AttributeError) as exc:
            reason = f"prctl(PR_SET_CHILD_SUBREAPER): {exc}"
    try:
        yield reason
    finally:
        if not already and reason is None:
            with contextlib.suppress(OSError, AttributeError):
                _prctl(PR_SET_CHILD_SUBREAPER, 0)
        reap_adopted()  # children adopted inside stay ours once it ends


def adopted_zombies(pid: int | None = None) -> list[int]:
    """Zombie children of ``pid`` (this process) that it adopted: in a session other than
    its own that they do not lead."""
    me = os.getpid() if pid is None else pid
    own_session = os.getsid(me)
    out = []
    for child in procfs.children(me):
        try:
            st = procfs.read_stat(child)
        except (procfs.ProcessGone, PermissionError):
            continue
        if st.state == "Z" and st.session not in (own_session, child) and st.ppid == me:
            out.append(child)
    return out


def reap_adopted() -> list[int]:
    """Wait for every adopted zombie of this process (never a child it started); their pids."""
    reaped = []
    for child in adopted_zombies():
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(child, os.WNOHANG)[0] == child:
                reaped.append(child)
    return reaped
