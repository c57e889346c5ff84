"""Kernel timestamps of a command's exec and exit, from the process events connector.

The Linux proc connector (netlink, ``CN_IDX_PROC``; root only) reports every exec and exit on the
host with ``ktime_get_ns`` timestamps, which is CLOCK_MONOTONIC. The wall time of one command is
then the root's first exec to the root's exit as the kernel saw them: no fork of the measuring
process, no thread wake-up and no GIL hand-over in it. Where the connector is unavailable (not
root, not built, buffer overrun on a busy host) the caller keeps its own stamps and says so.
"""

from __future__ import annotations

import _socket  # socket.py's enum conversions cost measure's start-up ~2 ms; the C type suffices
import contextlib
import os
import struct

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
LISTEN, IGNORE = 1, 2
NLMSG_DONE = 3
EVENT_FORK = 0x00000001
EVENT_EXEC = 0x00000002
EVENT_EXIT = 0x80000000
HEADER = struct.Struct("=IHHII")  # nlmsghdr
CN_MSG = struct.Struct("=IIIIHH")  # cn_msg before its payload
# what, cpu, timestamp_ns, pid, tgid (a fork's parent), then a fork's child pid and tgid
EVENT = struct.Struct("=IIQIIII")
RECEIVE_BUFFER = 8 << 20  # a loaded host execs and exits a lot while one command runs


class ProcEvents:
    """One subscription; ``span(pid)`` after the pid has exited, ``close()`` when done."""

    def __init__(self) -> None:
        self.sock = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        try:
            with contextlib.suppress(OSError):  # SO_RCVBUFFORCE: root may exceed rmem_max
                self.sock.setsockopt(_socket.SOL_SOCKET, 33, RECEIVE_BUFFER)
            self.sock.bind((0, CN_IDX_PROC))
            self._control(LISTEN)
            self.sock.setblocking(False)
        except OSError:
            self.sock.close()
            raise
        self.overrun = False

    def _control(self, op: int) -> None:
        payload = struct.pack("=I", op)
        cn = CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(payload), 0) + payload
        self.sock.send(HEADER.pack(HEADER.size + len(cn), NLMSG_DONE, 0, 0, os.getpid()) + cn)

    def span(self, pid: int) -> tuple[int, int] | None:
        """(first exec ns, exit ns) of ``pid``, or None when the events were not both seen."""
        tree = self.tree(pid)
        return tree.span if tree is not None else None

    def tree(self, pid: int) -> Tree | None:
        """What the kernel reported of ``pid`` and the processes its tree forked, read once
        ``pid`` has exited; None when events were dropped (nothing can then be trusted)."""
        tree = Tree(pid)
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:  # ENOBUFS: events were dropped, the span cannot be trusted
                self.overrun = True
                return None
            for record in _records(data):
                tree.add(record)
        return tree

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.setblocking(True)
            self._control(IGNORE)
        self.sock.close()


class Tree:
    """One command's events: its root's exec and exit, and the processes of its tree."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.exec_ns: int | None = None
        self.exit_ns: int | None = None
        self._events: list[tuple[int, int, int, int, int]] = []  # stamp, what, pid, tgid, child

    def add(self, event: tuple[int, int, int, int, int, int]) -> None:
        what, stamp, pid, tgid, child_pid, child_tgid = event
        if what == EVENT_FORK and child_pid == child_tgid:  # a new process, not a thread
            self._events.append((stamp, what, pid, tgid, child_pid))
        elif what == EVENT_EXIT and pid == tgid:  # a process's last thread
            self._events.append((stamp, what, pid, tgid, 0))
        if pid != self.root or tgid != self.root:
            return
        if what == EVENT_EXEC and self.exec_ns is None:
            self.exec_ns = stamp
        elif what == EVENT_EXIT:
            self.exit_ns = stamp

    @property
    def span(self) -> tuple[int, int] | None:
        if self.exec_ns is None or self.exit_ns is None or self.exit_ns < self.exec_ns:
            return None
        return self.exec_ns, self.exit_ns

    def process_peak(self) -> int | None:
        """The most processes of the tree alive at once (the root from its exec; every process
        a member forked until it exits), in the kernel's time order; None without the root's
        exec. Exact where a sampler can only see who is alive when it looks."""
        if self.exec_ns is None:
            return None
        alive, peak = {self.root}, 1
        for stamp, what, pid, tgid, child in sorted(self._events):
            if stamp < self.exec_ns:
                continue
            if what == EVENT_FORK and tgid in alive:
                alive.add(child)
                peak = max(peak, len(alive))
            elif what == EVENT_EXIT:
                alive.discard(pid)
        return peak


def _events(data: bytes) -> list[tuple[int, int, int, int]]:
    """(what, stamp, pid, tgid) of each event in ``data`` (for a fork: the parent's)."""
    return [record[:4] for record in _records(data)]


def _records(data: bytes) -> list[tuple[int, int, int, int, int, int]]:
    """(what, stamp, pid, tgid, fork child pid, fork child tgid) of each event in ``data``."""
    out = []
    offset = 0
    while offset + HEADER.size <= len(data):
        length = HEADER.unpack_from(data, offset)[0]
        if length < HEADER.size:
            break
        start = offset + HEADER.size + CN_MSG.size
        if start + EVENT.size <= offset + length:
            what, _cpu, stamp, pid, tgid, child_pid, child_tgid = EVENT.unpack_from(data, start)
            out.append((what, stamp, pid, tgid, child_pid, child_tgid))
        offset += (length + 3) & ~3
    return out


def open_events() -> ProcEvents | None:
    """A subscription, or None where the connector cannot be used (not root, not built)."""
    try:
        return ProcEvents()
    except OSError:
        return None
