"""Foreign CPU: what the machine spent beside the benchmark, interval by interval.

Each ``observe()`` reads the machine's busy CPU from ``/proc/stat`` and the ``stat`` of every
visible process, and differences them against the previous observation:

- *machine CPU*: busy ticks of all CPUs (user, nice, system, irq, softirq; steal is another
  guest's, not ours) over the wall time between the two observations, in cores;
- *benchmark CPU*: the CPU of the benchmark's processes — the root's process tree, plus every
  member of its accounting groups (``member_pids``), plus every process in a session one of them
  leads or that the caller claimed at launch (``claim_session``: an engine too short-lived for
  any scan to see lead it), plus every process once seen as any of these, for as long as it
  lives (an engine helper reparented to init stays the engine's);
- *foreign CPU* = machine − benchmark, with the visible foreign processes that used the most.

Why per-process ``stat`` and not the groups' own counters: the groups of a compute worker or a
cold-start sample are removed when it ends, taking their last interval with them, and a group
member reaped by the harness also lands in the harness's ``cutime`` — counting both would count
the engine twice. Per process, the CPU of a child that exits moves into its reaper's
``cutime``/``cstime`` (the kernel adds it at ``wait``), so the benchmark's total stays
continuous: a vanished member's last reading is taken off only when its CPU reappeared in a
surviving member. A member that exits without being waited for by a member loses the CPU it
spent since the last observation; that CPU then shows up as foreign (never the other way round).

No command line or environment is read: a foreign process is its pid, ``comm`` and CPU share.
This module imports nothing above ``measure``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from metewand.measure import procfs
from metewand.measure.procfs import CpuStat

PROC = "/proc"
TOP_FOREIGN = 8  # per sample: enough to name a modest consumer on a crowded host
Key = tuple[int, int]  # (pid, starttime ticks): a pid reused by a new process is a new key
MemberPids = Callable[[], Iterable[int]]


def read_machine_busy_ticks(proc: str = PROC) -> int:
    """Busy clock ticks of all CPUs since boot (the aggregate ``cpu`` line of /proc/stat)."""
    with open(f"{proc}/stat", "rb") as handle:
        first = handle.readline().split()
    if not first or first[0] != b"cpu" or len(first) < 8:
        raise ValueError(f"{proc}/stat: no aggregate 'cpu' line")
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in first[1:8])
    return user + nice + system + irq + softirq


def boot_ticks_now() -> int:
    """Now, in the clock ticks since boot that ``/proc/PID/stat`` start times use."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * procfs.clock_ticks())


class _Snapshot(NamedTuple):  # not a dataclass: see measure.accounting
    monotonic_ns: int
    boot_ticks: int
    machine_busy_ticks: int
    stats: dict[Key, CpuStat]
    bench: set[Key]


def _keyed(stats: dict[int, CpuStat]) -> dict[Key, CpuStat]:
    return {(pid, st.starttime_ticks): st for pid, st in stats.items()}


def _tree_keys(root_pid: int, stats: dict[Key, CpuStat]) -> set[Key]:
    """The root and its descendants, by the parent links of one scan."""
    children: dict[int, list[Key]] = {}
    root: Key | None = None
    for key, st in stats.items():
        children.setdefault(st.ppid, []).append(key)
        if key[0] == root_pid:
            root = key
    if root is None:
        return set()
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop()[0], ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class ForeignCpuTracker:
    """Foreign CPU of a benchmark rooted at ``root_pid``; see the module docstring. (A plain
    class, not a dataclass: this module is on measure's start-up path, see measure.accounting.)
    """

    def __init__(
        self,
        root_pid: int,
        member_pids: MemberPids | None = None,
        proc: str = PROC,
        top_n: int = TOP_FOREIGN,
    ) -> None:
        self.root_pid = root_pid
        self.member_pids = member_pids
        self.proc = proc
        self.top_n = top_n
        self.member_errors: list[str] = []
        self._previous: _Snapshot | None = None
        self._start_boot_ticks = boot_ticks_now()
        self._ever_bench: set[Key] = set()
        self._bench_sessions: set[int] = set()
        # sessions the caller claimed at launch: {session id: monotonic ns of the claim}
        self._claimed: dict[int, int] = {}
        self._started_foreign: dict[Key, tuple[str, bool]] = {}
        # descendants of the root in the last scan (root excluded): the host sample's count
        self.tree_size: int | None = None
        self._stat_files = procfs.StatFiles(proc)  # kept open from one observation to the next

    def claim_session(self, session: int) -> None:
        """The session ``session`` is the benchmark's: a process the caller just launched as
        the leader of its own session (an engine). Scans learn a session only from a leader they
        saw; an engine launched and stopped between two scans (a cold-start sample lasts well
        under a second) leaves helpers reparented to init, often zombies waiting for init to
        reap them, in a session no scan saw led. Safe from any thread."""
        self._claimed[session] = time.monotonic_ns()

    def observe(self) -> dict[str, Any] | None:
        """The figures of the interval since the previous call (None on the first call)."""
        busy = read_machine_busy_ticks(self.proc)
        now_ns = time.monotonic_ns()
        boot = boot_ticks_now()
        stats = _keyed(self._stat_files.read_all_cpu())
        bench = self._bench_keys(stats, now_ns)
        self._ever_bench |= bench
        snapshot = _Snapshot(now_ns, boot, busy, stats, bench)
        previous, self._previous = self._previous, snapshot
        self._note_started(snapshot)
        return None if previous is None else self._interval(previous, snapshot)

    def close(self) -> None:
        """Close the kept ``stat`` descriptors (a later ``observe`` opens them again)."""
        self._stat_files.close()

    def _bench_keys(self, stats: dict[Key, CpuStat], read_ns: int) -> set[Key]:
        bench = _tree_keys(self.root_pid, stats)
        self.tree_size = max(0, len(bench) - 1)  # the root's descendants, by this scan
        members = set(self._members())
        bench |= {key for key in stats if key[0] in members}
        # a session the benchmark started is the benchmark's: an engine launched in its own
        # session keeps it in helpers that double-fork away from the tree (crash handlers)
        leaders = {key[0] for key in bench if stats[key].session == key[0]}
        # ... and stays so after its leader exits (an engine's browser process ending before
        # helpers it forked between two samples): the kernel does not reuse a session's id
        # while any process is still in that session, so the id is dropped once it is empty
        live_sessions = {st.session for st in stats.values()}
        claimed = self._live_claims(live_sessions, read_ns)
        self._bench_sessions = (self._bench_sessions | leaders | claimed) & live_sessions
        bench |= {key for key, st in stats.items() if st.session in self._bench_sessions}
        # once the benchmark's, always the benchmark's while it lives (reparented helpers)
        bench |= {key for key in stats if key in self._ever_bench}
        return bench

    def _live_claims(self, live_sessions: set[int], read_ns: int) -> set[int]:
        """The claimed sessions this scan saw; a claim gone from it is dropped, unless it was
        made after the clock read that precedes the scan (the scan may predate the launch)."""
        claims = dict(self._claimed)  # a copy: claims arrive from other threads
        for session, at in claims.items():
            if session not in live_sessions and at < read_ns:
                self._claimed.pop(session, None)
        return {session for session in claims if session in live_sessions}

    def _members(self) -> list[int]:
        if self.member_pids is None:
            return []
        try:
            return list(self.member_pids())
        except (OSError, ValueError, RuntimeError) as exc:  # a group removed under us
            if len(self.member_errors) < 10:
                self.member_errors.append(f"{type(exc).__name__}: {exc}")
            return []

    def _note_started(self, snap: _Snapshot) -> None:
        started, since = self._started_foreign, self._start_boot_ticks
        for key, st in snap.stats.items():
            if key[1] >= since and key not in started and key not in snap.bench:
                started[key] = (st.comm, st.kernel_thread)

    def _interval(self, prev: _Snapshot, now: _Snapshot) -> dict[str, Any]:
        wall_ns = max(1, now.monotonic_ns - prev.monotonic_ns)
        per_core = procfs.ticks_to_ns(1) / wall_ns  # one tick over this wall, in cores
        machine = (now.machine_busy_ticks - prev.machine_busy_ticks) * per_core
        bench = _bench_ticks(prev, now) * per_core
        shares = _foreign_shares(prev, now)
        visible = sum(ticks for ticks, _ in shares) * per_core
        top = [
            {"pid": key[0], "comm": now.stats[key].comm, "cpu_cores": round(ticks * per_core, 4)}
            for ticks, key in shares[: self.top_n]
        ]
        return {
            "interval_s": round(wall_ns / 1e9, 4),
            "machine_cpu_cores": round(machine, 4),
            "bench_cpu_cores": round(bench, 4),
            "foreign_cpu_cores": round(machine - bench, 4),
            "visible_foreign_cpu_cores": round(visible, 4),
            "bench_process_count": len(now.bench),
            "foreign_process_count": len(now.stats) - len(now.bench),
            "top_foreign": top,
        }

    def started_foreign(self) -> dict[str, Any]:
        """Foreign processes that started during the run and were seen by a scan."""
        started = {k: v for k, v in self._started_foreign.items() if k not in self._ever_bench}
        kernel = sum(1 for _, is_kthread in started.values() if is_kthread)
        comms: dict[str, int] = {}
        for comm, _ in started.values():
            comms[comm] = comms.get(comm, 0) + 1
        common = sorted(comms.items(), key=lambda item: (-item[1], item[0]))[: self.top_n]
        return {
            "count": len(started),
            "kernel_threads": kernel,
            "most_common_comm": [{"comm": c, "count": n} for c, n in common],
            "seen_by": "scans at each host sample (a process born and gone between two is missed)",
        }


def _bench_ticks(prev: _Snapshot, now: _Snapshot) -> int:
    """Benchmark CPU between two scans: the change of the members' totals, continuous across
    a member's exit when a surviving member reaped it (its total moved into the reaper's)."""
    ticks = 0
    for key in now.bench:
        before = prev.stats.get(key)
        ticks += now.stats[key].total_ticks - (before.total_ticks if before is not None else 0)
    by_pid = {key[0]: key for key in prev.stats}
    for key in prev.bench - now.stats.keys():
        if _reaped_into_bench(key, prev, now, by_pid):
            ticks -= prev.stats[key].total_ticks
    return ticks


def _reaped_into_bench(key: Key, prev: _Snapshot, now: _Snapshot, by_pid: dict[int, Key]) -> bool:
    """Whether a vanished member's CPU reappeared in a surviving member: its parent (or the
    nearest ancestor that outlived the interval) is a member now."""
    seen: set[Key] = set()
    while key not in seen:
        seen.add(key)
        parent = by_pid.get(prev.stats[key].ppid)
        if parent is None:
            return False
        if parent in now.stats:
            return parent in now.bench
        key = parent
    return False


def _foreign_shares(prev: _Snapshot, now: _Snapshot) -> list[tuple[int, Key]]:
    """Own CPU ticks of each foreign process in the interval, largest first (zeros left out).

    Own CPU only: a foreign parent's reaped children would otherwise count twice. A process
    missing from the previous scan counts whole only if it started after that scan.
    """
    shares: list[tuple[int, Key]] = []
    for key, st in now.stats.items():
        if key in now.bench:
            continue
        before = prev.stats.get(key)
        if before is not None:
            ticks = st.own_ticks - before.own_ticks
        elif key[1] >= prev.boot_ticks:
            ticks = st.own_ticks
        else:
            continue
        if ticks > 0:
            shares.append((ticks, key))
    shares.sort(key=lambda item: (-item[0], item[1]))
    return shares


def look(seconds: float, root_pid: int, top_n: int = TOP_FOREIGN) -> dict[str, Any]:
    """Foreign CPU over one look of ``seconds`` (``doctor``): everything but ``root_pid``'s tree."""
    tracker = ForeignCpuTracker(root_pid, top_n=top_n)
    try:
        tracker.observe()
        time.sleep(seconds)
        figures = tracker.observe()
    finally:
        tracker.close()
    assert figures is not None  # the second observation always has an interval
    return figures
