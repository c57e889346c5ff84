"""Kernel timestamps of a command's exec and exit, from the process events connector.

The Linux proc connector (netlink, ``CN_IDX_PROC``; root only) reports every exec and exit on the
host with ``ktime_get_ns`` timestamps, which is CLOCK_MONOTONIC. The wall time of one command is
then the root's first exec to the root's exit as the kernel saw them: no fork of the measuring
process, no thread wake-up and no GIL hand-over in it. Where the connector is unavailable (not
root, not built, buffer overrun on a busy host) the caller keeps its own stamps and says so.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
LISTEN, IGNORE = 1, 2
NLMSG_DONE = 3
EVENT_EXEC = 0x00000002
EVENT_EXIT = 0x80000000
HEADER = struct.Struct("=IHHII")  # nlmsghdr
CN_MSG = struct.Struct("=IIIIHH")  # cn_msg before its payload
EVENT = struct.Struct("=IIQII")  # what, cpu, timestamp_ns, pid, tgid
RECEIVE_BUFFER = 8 << 20  # a loaded host execs and exits a lot while one command runs


class ProcEvents:
    """One subscription; ``span(pid)`` after the pid has exited, ``close()`` when done."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        try:
            with contextlib.suppress(OSError):  # SO_RCVBUFFORCE: root may exceed rmem_max
                self.sock.setsockopt(socket.SOL_SOCKET, 33, RECEIVE_BUFFER)
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
        exec_ns = exit_ns = None
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:  # ENOBUFS: events were dropped, the span cannot be trusted
                self.overrun = True
                return None
            for what, stamp, event_pid, tgid in _events(data):
                if event_pid != pid or tgid != pid:
                    continue
                if what == EVENT_EXEC and exec_ns is None:
                    exec_ns = stamp
                elif what == EVENT_EXIT:
                    exit_ns = stamp
        if exec_ns is None or exit_ns is None or exit_ns < exec_ns:
            return None
        return exec_ns, exit_ns

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.setblocking(True)
            self._control(IGNORE)
        self.sock.close()


def _events(data: bytes) -> list[tuple[int, int, int, int]]:
    out = []
    offset = 0
    while offset + HEADER.size <= len(data):
        length = HEADER.unpack_from(data, offset)[0]
        if length < HEADER.size:
            break
        start = offset + HEADER.size + CN_MSG.size
        if start + EVENT.size <= offset + length:
            what, _cpu, stamp, pid, tgid = EVENT.unpack_from(data, start)
            out.append((what, stamp, pid, tgid))
        offset += (length + 3) & ~3
    return out


def open_events() -> ProcEvents | None:
    """A subscription, or None where the connector cannot be used (not root, not built)."""
    try:
        return ProcEvents()
    except OSError:
        return None
