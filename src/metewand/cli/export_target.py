"""Files a command writes at a path the user named (``measure --export-*``, ``export -o``).

A path is looked at (``lstat``) before anything runs, and what it names decides how it is written:

- nothing, or a regular file: replaced whole and crash-safe at the end (a temporary file in the
  same directory, fsync, rename: a reader sees the old file or the new one); that the directory
  takes a file is proved before any run by making and removing one (``/proc`` is refused then);
- a symbolic link: followed, and what it leads to is written as above (the link stays a link);
- a character device (``/dev/null``, ``/dev/stdout`` on a terminal) or a FIFO (``>(jq .)``):
  written through, never replaced; a FIFO waits up to ``FIFO_READER_WAIT_S`` for a reader;
- a directory, a block device or a socket: refused.

A refusal is ``InvalidInput`` (exit 2) naming the option and the path; nothing is written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time

from metewand.errors import InvalidInput

FIFO_READER_WAIT_S = 10.0


class TargetRefused(InvalidInput):
    """The path cannot be written as asked (exit 2); the message names option and path."""


class Target:
    """One path to write once: ``write(data)`` at the end, or ``discard()``."""

    def __init__(self, option: str, path: str) -> None:
        self.option, self.path = option, path
        self._final: str | None = None  # regular: the file the rename replaces
        self._temp: str | None = None
        self._fd = -1
        self._through = False  # a device or FIFO: written in place
        self._fifo = False
        self._inspect()

    def _refuse(self, why: str) -> TargetRefused:
        return TargetRefused(f"{self.option} {self.path}: {why}")

    def _inspect(self) -> None:
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            return self._prepare_regular(self.path)
        except OSError as exc:
            raise self._refuse(f"cannot be examined ({exc.strerror or exc})") from None
        if stat.S_ISLNK(mode):
            final = os.path.realpath(self.path)
            try:
                mode = os.stat(final).st_mode
            except FileNotFoundError:  # a dangling link: its target is made, the link kept
                return self._prepare_regular(final)
            except OSError as exc:
                raise self._refuse(f"its link cannot be followed ({exc.strerror or exc})") from None
            return self._by_kind(mode, final)
        return self._by_kind(mode, self.path)

    def _by_kind(self, mode: int, final: str) -> None:
        if stat.S_ISREG(mode):
            return self._prepare_regular(final)
        if stat.S_ISCHR(mode):
            self._through = True
            self._fd = self._open_through(final, os.O_WRONLY)
            return None
        if stat.S_ISFIFO(mode):
            self._through = self._fifo = True
            self._final = final
            return None
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a block device"
            if stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a file"
        )
        raise self._refuse(f"is {kind}; name a file, a character device or a FIFO")

    def _open_through(self, final: str, flags: int) -> int:
        try:
            return os.open(final, flags | os.O_CLOEXEC | os.O_NOCTTY)
        except OSError as exc:
            raise self._refuse(f"cannot be opened for writing ({exc.strerror or exc})") from None

    def _prepare_regular(self, final: str) -> None:
        """Prove now that the final directory takes a file (``/proc`` does not): a probe file is
        made and removed at once, so a killed measurement leaves nothing behind."""
        directory = os.path.dirname(final) or "."
        if not os.path.isdir(directory):
            raise self._refuse("no such directory to export into")
        try:
            os.close(self._create_temp(directory, final))
        except OSError as exc:
            raise self._refuse(f"cannot be written there ({exc.strerror or exc})") from None
        finally:
            self._remove_temp()
        self._final = final

    def _create_temp(self, directory: str, final: str) -> int:
        temp = os.path.join(directory, f".{os.path.basename(final)}.{os.urandom(4).hex()}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        self._temp = temp
        return fd

    def _remove_temp(self) -> None:
        if self._temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._temp)
            self._temp = None

    def write(self, data: bytes) -> None:
        """Write ``data`` whole; a failure raises ``TargetRefused`` and leaves the old file."""
        try:
            if self._fifo:
                assert self._final is not None
                self._fd = self._open_fifo(self._final)
            if self._through:
                _write_all(self._fd, data)
            else:
                self._publish(data)
        except OSError as exc:
            raise self._refuse(f"cannot be written ({exc.strerror or exc})") from None
        finally:
            self.discard()

    def _publish(self, data: bytes) -> None:
        """A temporary file beside the final one, fsynced, renamed over it, the dir fsynced."""
        assert self._final is not None
        directory = os.path.dirname(self._final) or "."
        self._fd = self._create_temp(directory, self._final)  # umask applies, as for open()
        _write_all(self._fd, data)
        os.fsync(self._fd)
        assert self._temp is not None
        os.replace(self._temp, self._final)
        self._temp = None
        _fsync_dir(directory)

    def _open_fifo(self, final: str) -> int:
        """Open the FIFO once a reader has it open (a writer without one would block for good)."""
        deadline = time.monotonic() + FIFO_READER_WAIT_S
        while True:
            try:
                fd = os.open(final, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as exc:
                if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                    if exc.errno == errno.ENXIO:
                        raise OSError(
                            errno.ENXIO, f"no reader for {FIFO_READER_WAIT_S:g} s"
                        ) from None
                    raise
                time.sleep(0.05)
                continue
            os.set_blocking(fd, True)
            return fd

    def discard(self) -> None:
        """Close what is open and remove a temporary file (nothing is replaced)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
        self._remove_temp()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_targets(named: dict[str, str | None]) -> dict[str, Target]:
    """``{option: path}`` -> a Target per given path; refuses a path named twice. On a refusal
    the targets already prepared are discarded."""
    targets: dict[str, Target] = {}
    seen: dict[str, str] = {}
    try:
        for option, path in named.items():
            if not path:
                continue
            key = os.path.realpath(path)
            if key in seen and not _is_device(key):
                raise TargetRefused(f"{option} {path}: also given to {seen[key]}")
            seen[key] = option
            targets[option] = Target(option, path)
    except BaseException:
        for target in targets.values():
            target.discard()
        raise
    return targets


def _is_device(path: str) -> bool:
    with contextlib.suppress(OSError):
        return stat.S_ISCHR(os.stat(path).st_mode)
    return False
