"""The watchdog process (``measure.watchdog`` starts one per metewand process that starts work).

Run as ``python -I -S watchdog_main.py SRC_ROOT COMMAND_FD RUNNER_PIDFD RUNNER_PID READY_FD`` in a
session of its own, outside every accounting group. It reads what its runner guards from the command
pipe, one line each:

    R <start> <parent>            every group in <parent> named as the runner's (its pid and
                                  <start>, ``orphans.group_name``); sent before its first one
    P <pid> <start> <session>     a process the runner started (its identity)
    F <pid> <start>               that process was reaped: forget it
    D <path>                      a private directory the runner made (an engine's profile)
    U <path>                      the runner removed that directory itself: forget it

When the runner is gone (its pidfd becomes readable; without a pidfd, the pipe's end of file),
it reads what is still in the pipe, finds the runner's groups in the R parents by their names,
kills their members (``cgroup.kill`` where the kernel has it) and every live guarded
process with the members of the session it led (``process_sweep.left_alive``: a recycled pid is
never hit), removes the groups, then the guarded directories (a real directory at an absolute
path, never through a symlink), and exits. A runner that ended normally left nothing, so then
there is nothing to do but look. On its start it also
removes orphan groups that earlier metewand processes left (``measure.orphans``), in a thread,
so the pipe is read meanwhile, at the lowest priority (not with ``METEWAND_ORPHAN_SWEEP=off``);
READY_FD hears a byte once it is up (``watchdog.ready``).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading

SWEEP_WAIT_S = 4.0  # per step; the whole sweep stays well inside the promised 10 s


def _load(src_root: str) -> None:
    # -I -S: no user site, no PYTHONPATH; the package is found where the runner's copy lives
    # (the script's own directory is not a package root: drop it, it would shadow nothing
    # useful and could shadow a standard module).
    sys.path[0:1] = [src_root]


class Guarded:
    def __init__(self) -> None:
        self.parents: dict[str, int] = {}  # R: parent -> the runner's start time
        self.processes: dict[tuple[int, int], int] = {}  # (pid, start) -> session
        self.dirs: dict[str, None] = {}
        self._pending = b""

    def feed(self, data: bytes) -> None:
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            text = line.decode("utf-8", "surrogateescape")
            if text[:2] in ("D ", "U "):  # a path may hold spaces: the rest of the line is it
                self._directory(text[0], text[2:])
            elif text[:2] == "R ":
                self._parent(text[2:])
            else:
                self._apply(text.split(" ", 3))

    def _directory(self, command: str, path: str) -> None:
        if command == "D":
            self.dirs[path] = None
        else:
            self.dirs.pop(path, None)

    def _parent(self, rest: str) -> None:
        start, _, parent = rest.partition(" ")
        with contextlib.suppress(ValueError):  # a malformed line names nothing to act on
            self.parents[parent] = int(start)

    def __bool__(self) -> bool:
        return bool(self.parents or self.processes or self.dirs)

    def _apply(self, parts: list[str]) -> None:
        try:
            if parts[0] == "P" and len(parts) == 4:
                self.processes[(int(parts[1]), int(parts[2]))] = int(parts[3])
            elif parts[0] == "F" and len(parts) == 3:
                self.processes.pop((int(parts[1]), int(parts[2])), None)
        except ValueError:
            pass  # a malformed line names nothing to act on


def _drain(fd: int, guarded: Guarded) -> bool:
    """Read what the pipe holds now; False at end of file."""
    os.set_blocking(fd, False)
    try:
        while True:
            data = os.read(fd, 65536)
            if not data:
                return False
            guarded.feed(data)
    except BlockingIOError:
        return True
    finally:
        os.set_blocking(fd, True)


def _sweep(guarded: Guarded, runner_pid: int) -> None:
    # the groups a runner removed itself are gone: none is found (a runner that ended
    # normally, the usual case, leaves none)
    groups = _named_groups(guarded.parents, runner_pid)
    if groups or guarded.processes:
        _kill_and_remove_groups(guarded, groups)
    for path in guarded.dirs:  # after the kills: no engine is left to write into them
        _remove_dir(path)


def _named_groups(parents: dict[str, int], runner_pid: int) -> list[str]:
    """The groups in the R parents whose names say the runner made them."""
    if not parents:
        return []
    from metewand.measure import orphans

    found = []
    for parent, start in parents.items():
        with contextlib.suppress(OSError), os.scandir(parent) as entries:
            found += [
                entry.path
                for entry in entries
                if orphans.creator_of(entry.name) == (runner_pid, start)
                and entry.is_dir(follow_symlinks=False)
            ]
    return found


def _remove_dir(path: str) -> None:
    import shutil
    import stat

    try:
        real_dir = stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return  # gone already (the runner removed it and its release was lost with it)
    # realpath of a relative path, or of one through a symlink, is another string
    if real_dir and os.path.realpath(path) == path:
        shutil.rmtree(path, ignore_errors=True)


def _kill_and_remove_groups(guarded: Guarded, groups: list[str]) -> None:
    from metewand.measure import orphans, process_sweep

    for path in groups:
        orphans.kill_group(path)
    identities = [
        process_sweep.Identity(pid, start, session)
        for (pid, start), session in guarded.processes.items()
    ]
    if identities:
        process_sweep.kill_until_gone(lambda: process_sweep.left_alive(identities), SWEEP_WAIT_S)
    for path in reversed(groups):
        orphans.remove_group(path, SWEEP_WAIT_S)


# "off" (or 0/false/no) keeps a starting metewand's hands off other processes' orphan groups: for
# looking at what a killed run left before `clean` removes it, or a test suite whose tests kill
# runs on purpose beside others that start metewand all the time. `clean --orphans` still works.
SWEEP_SWITCH = "METEWAND_ORPHAN_SWEEP"


def _sweep_switched_off() -> bool:
    return os.environ.get(SWEEP_SWITCH, "").strip().lower() in {"off", "0", "false", "no"}


def _remove_orphans() -> None:
    """Earlier metewand processes' orphan groups, at the lowest priority (this thread only: the
    watch itself keeps its own), so the sweep never competes with what the runner measures."""
    if _sweep_switched_off():
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    from metewand.measure import orphans

    with contextlib.suppress(Exception):  # a failed sweep must never stop the watch itself
        orphans.sweep_orphans()


def _started(ready_fd: int) -> None:
    """Tell the runner the interpreter is up (``watchdog.ready``)."""
    with contextlib.suppress(OSError):
        os.write(ready_fd, b"1")
        os.close(ready_fd)


def main(argv: list[str]) -> int:
    src_root, command_fd, runner_fd, ready_fd = argv[1], int(argv[2]), int(argv[3]), int(argv[5])
    _load(src_root)
    _started(ready_fd)
    orphan_sweep = threading.Thread(target=_remove_orphans, daemon=True)
    orphan_sweep.start()
    guarded = Guarded()
    poller = select.poll()
    poller.register(command_fd, select.POLLIN)
    if runner_fd >= 0:
        poller.register(runner_fd, select.POLLIN)
    reading = True
    while True:
        events = dict(poller.poll())
        if runner_fd >= 0 and runner_fd in events:
            break  # the runner is gone
        if command_fd in events and reading:
            reading = _drain(command_fd, guarded)
            if not reading:
                poller.unregister(command_fd)
                if runner_fd < 0:
                    break  # no pidfd: the pipe's end is the runner's end
    if reading:
        _drain(command_fd, guarded)
    if guarded:
        _sweep(guarded, int(argv[4]))
    # a runner done in milliseconds (`measure -- true`) must not end the orphan sweep it started
    orphan_sweep.join(2 * SWEEP_WAIT_S)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
