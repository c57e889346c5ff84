"""What the machine is: kernel, CPUs, governors, clock source, memory and cgroup layout.

The one home of host facts. Two views are built from the same readers: ``summary_facts`` (the
``host`` object of ``abb_host_summary/1``) and ``machine_facts`` (the ``host`` of a run manifest,
where every unreadable fact is ``{"unavailable": "<reason>"}``). This module imports nothing
above ``measure``.
"""

from __future__ import annotations

import os
from typing import Any

from metewand.measure.cgroups import detect_layout
from metewand.measure.forms import Reason

# Paths as strings: pathlib costs measure's start-up ~3 ms to load (benchmarks/measure_vs_hyperfine.py),
# and every reader here takes a str or any os.PathLike alike.
PROC = "/proc"
SYS_CPU = "/sys/devices/system/cpu"
CLOCKSOURCE = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
PathArg = str | os.PathLike[str]


def unavailable_reason(reason: Reason, detail: str) -> dict[str, str]:
    """The ``{"reason", "detail"}`` shape of host telemetry's ``unavailable`` entries."""
    return {"reason": reason.value, "detail": detail}


def reason_for(exc: OSError) -> Reason:
    if isinstance(exc, PermissionError):
        return Reason.PERMISSION_DENIED
    if isinstance(exc, FileNotFoundError):
        return Reason.UNSUPPORTED
    return Reason.ACCOUNTING_UNAVAILABLE


def unavailable(reason: str) -> dict[str, str]:
    """The manifest's shape for a fact that cannot be read."""
    return {"unavailable": reason}


def read_text(*parts: PathArg) -> str:
    """The text of the file ``os.path.join(*parts)`` (OSError when it cannot be read)."""
    with open(os.path.join(*parts), encoding="utf-8") as handle:
        return handle.read()


def read_text_or_none(path: PathArg) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def meminfo_bytes(proc: PathArg = PROC) -> dict[str, int]:
    """Every ``/proc/meminfo`` field with a number, in bytes (meminfo reports kB)."""
    fields: dict[str, int] = {}
    for line in read_text(proc, "meminfo").splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            fields[name] = int(parts[0]) * 1024
    return fields


def read_governors(sys_cpu: PathArg = SYS_CPU) -> dict[str, str]:
    """Scaling governor per CPU (``cpu0`` → ``performance``); empty without cpufreq."""
    found: dict[str, str] = {}
    try:
        names = sorted(n for n in os.listdir(sys_cpu) if n[:3] == "cpu" and n[3:4].isdigit())
    except OSError:
        return found
    for name in names:
        value = read_text_or_none(os.path.join(sys_cpu, name, "cpufreq", "scaling_governor"))
        if value is not None:
            found[name] = value
    return found


def cpu_governors(sys_cpu: PathArg = SYS_CPU) -> dict[str, Any]:
    """Host-summary view: every CPU's governor and the distinct values."""
    governors = read_governors(sys_cpu)
    if not governors:
        return {
            "governors": None,
            "unavailable": unavailable_reason(
                Reason.UNSUPPORTED, f"no cpufreq scaling_governor under {sys_cpu}"
            ),
        }
    return {"governors": governors, "distinct": sorted(set(governors.values()))}


def folded_governors(sys_cpu: PathArg = SYS_CPU) -> dict[str, Any]:
    """Manifest view: the governor per CPU, folded to one value when all agree."""
    found = read_governors(sys_cpu)
    if not found:
        return unavailable("no cpufreq scaling_governor exposed (virtual machine or no driver)")
    values = set(found.values())
    return {"all": values.pop()} if len(values) == 1 else {"per_cpu": found}


def clock_source() -> str | None:
    return read_text_or_none(CLOCKSOURCE)


def cpu_model() -> str | dict[str, str]:
    text = read_text_or_none(os.path.join(PROC, "cpuinfo"))
    if text is None:
        return unavailable("/proc/cpuinfo unreadable")
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Hardware", "Processor"):
            return value.strip()
    return unavailable("no model name in /proc/cpuinfo")


def _memory_total() -> int | dict[str, str]:
    try:
        return meminfo_bytes()["MemTotal"]
    except (OSError, ValueError, KeyError):
        return unavailable("no MemTotal in /proc/meminfo")


def _cgroup_hierarchies() -> dict[str, Any]:
    try:
        return detect_layout().to_json()
    except OSError as exc:
        return unavailable(f"cgroup layout unreadable: {exc}")


def machine_facts() -> dict[str, Any]:
    """The ``host`` of a run manifest: what a run ran on, each fact or why it is missing."""
    uname = os.uname()
    return {
        "hostname": _hostname(),
        "kernel": f"{uname.sysname} {uname.release}",
        "kernel_version": uname.version,
        "arch": uname.machine,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count() or unavailable("os.cpu_count() unknown"),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "memory_bytes": _memory_total(),
        "cpu_governor": folded_governors(),
        "clock_source": clock_source() or unavailable(f"{CLOCKSOURCE} unreadable"),
        "cgroup_layout": _cgroup_hierarchies(),
        "libc": _libc(),
    }


_V1_CONTROLLERS = frozenset(
    [
        "cpu",
        "cpuacct",
        "cpuset",
        "memory",
        "devices",
        "freezer",
        "net_cls",
        "blkio",
        "perf_event",
        "net_prio",
        "hugetlb",
        "pids",
        "rdma",
        "misc",
    ]
)


def cgroup_mounts(proc: PathArg = PROC) -> dict[str, Any]:
    """Which cgroup hierarchies are mounted, and this process's group in each (no probing)."""
    v2_mounts: list[str] = []
    v1_controllers: dict[str, str] = {}
    for line in read_text(proc, "self", "mounts").splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup2":
            v2_mounts.append(parts[1])
        elif parts[2] == "cgroup":
            for opt in parts[3].split(","):
                if opt in _V1_CONTROLLERS or opt.startswith("name="):
                    v1_controllers[opt] = parts[1]
    own = {}
    for line in read_text(proc, "self", "cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        own[controllers or "unified"] = path
    version = "hybrid" if v2_mounts and v1_controllers else ("v2" if v2_mounts else "v1")
    if not v2_mounts and not v1_controllers:
        version = "none"
    return {
        "version": version,
        "v2_mounts": v2_mounts,
        "v1_controllers": dict(sorted(v1_controllers.items())),
        "own_groups": dict(sorted(own.items())),
    }


def _hostname() -> str:
    import socket  # here: a manifest's fact; measure's start-up need not convert socket's enums

    return socket.gethostname()


def _libc() -> Any:
    import platform  # here: ~5 ms to load, and only a run manifest asks for the libc

    return " ".join(platform.libc_ver()) or unavailable("libc unknown")


def summary_facts() -> dict[str, Any]:
    """The ``host`` of ``abb_host_summary/1`` (``platform``'s release, system and machine are
    os.uname()'s fields: read there, without loading ``platform``)."""
    uname = os.uname()
    facts: dict[str, Any] = {
        "kernel": uname.release,
        "platform": uname.sysname,
        "machine": uname.machine,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "cpu_governor": cpu_governors(),
    }
    try:
        facts["cgroup"] = cgroup_mounts()
    except OSError as exc:
        facts["cgroup"] = {
            "version": None,
            "unavailable": unavailable_reason(reason_for(exc), str(exc)),
        }
    return facts
