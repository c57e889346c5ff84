"""Hosts made of Linux namespaces, for the multi-host Dask tests: nothing leaves the machine.

A ``NetnsLab`` makes a bridge in the root network namespace holding a private /24 (an unused
``10.x.y.0/24``: the bridge is ``.1``, where the scheduler listens). Each ``NsHost`` is:

- a network namespace with one veth into the bridge (its address ``.10+i``) and its own
  loopback, where its worker's fixture server and engines listen;
- a UTS namespace with its own host name (``socket.gethostname()`` in its worker is the host's
  name, as on a real machine; no worker is renamed);
- its own cgroup subtree: a cgroup2 group (CPU accounting of the engines it launches nests
  there), a cgroup1 ``memory`` group, and a cgroup1 ``cpuset`` group holding one CPU of its own
  (this hybrid machine offers cpuset through v1 only: cgroup2 here enables no controller);
- one ``dask worker`` started through ``ip netns exec``. That command mounts a fresh sysfs for
  the namespace, which hides the machine's cgroup mounts, so the worker's shell mounts them
  again inside its private mount namespace, as the machine has them (a host without its cgroups
  would fall back to /proc accounting and measure less).

``tear_down`` is what losing a host looks like: its link goes down first (the scheduler stops
hearing it and notices by its worker TTL), then every process in it is killed and the
namespace, veth and groups are removed. ``close`` removes everything the lab made, also after a
failed test; every name carries the lab's random tag.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import dask_helpers as helpers

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=check)


def _mounts() -> list[tuple[str, str, str]]:
    """(fstype, mountpoint, options) of every cgroup mount of this mount namespace."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append((parts[2], parts[1], parts[3]))
    return found


def _own_group(controller: str) -> str | None:
    """This process's group path in a v1 hierarchy (``controller``) or v2 (``""``)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hier, controllers, path = line.split(":", 2)
        if controller == "" and hier == "0" and controllers == "":
            return path
        if controller and controller in controllers.split(","):
            return path
    return None


def _v1_options(options: str) -> str:
    """A v1 mount's controllers (and name=) from its mount options."""
    keep = [
        o
        for o in options.split(",")
        if o not in ("rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec")
    ]
    return ",".join(["none", *keep]) if any(o.startswith("name=") for o in keep) else ",".join(keep)


def remount_cgroups_script() -> str:
    """Shell lines that mount this machine's cgroup hierarchies again where it has them (run
    inside the private mount namespace ``ip netns exec`` made)."""
    lines = ["mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup"]
    for fstype, mountpoint, options in _mounts():
        if not mountpoint.startswith("/sys/fs/cgroup/"):
            continue
        lines.append(f"mkdir -p {shlex.quote(mountpoint)}")
        opts = "" if fstype == "cgroup2" else f"-o {shlex.quote(_v1_options(options))} "
        lines.append(f"mount -t {fstype} {opts}{fstype} {shlex.quote(mountpoint)}")
    return " && ".join(lines)


def cannot_make_hosts() -> str | None:
    """Why namespace hosts cannot be made here, or None (a probe namespace is made and
    removed; the cgroup groups the hosts need are checked)."""
    if os.geteuid() != 0:
        return "not root: network namespaces and cgroups need root"
    for tool in ("ip", "unshare", "mount"):
        if _run("sh", "-c", f"command -v {tool}", check=False).returncode != 0:
            return f"{tool} not found"
    mounts = {mp for _, mp, _ in _mounts()}
    if not any(fstype == "cgroup2" for fstype, _, _ in _mounts()):
        return "no cgroup2 mount (CPU accounting of each host's engines needs it)"
    if not any(mp.endswith("/cpuset") for mp in mounts) and not _v2_has("cpuset"):
        return "no cpuset controller (v1 or v2): a host cannot have its own CPU"
    if (os.cpu_count() or 1) < 2:
        return "one CPU: two hosts cannot each have their own"
    probe = f"mwprobe{secrets.token_hex(3)}"
    made = _run("ip", "netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    try:
        inside = _run(
            "ip",
            "netns",
            "exec",
            probe,
            "unshare",
            "--uts",
            "sh",
            "-c",
            remount_cgroups_script() + " && hostname probe && hostname",
            check=False,
        )
        if inside.returncode != 0 or inside.stdout.strip() != "probe":
            return f"cannot mount cgroups or name a host inside a namespace: {inside.stderr}"
    finally:
        _run("ip", "netns", "delete", probe, check=False)
    return None


def _v2_has(controller: str) -> bool:
    mount = next((mp for fs, mp, _ in _mounts() if fs == "cgroup2"), None)
    if mount is None:
        return False
    return controller in (Path(mount) / "cgroup.controllers").read_text().split()


def _free_subnet() -> ipaddress.IPv4Network:
    used = _run("ip", "-4", "route", "show", "table", "all").stdout
    used += _run("ip", "-4", "addr").stdout
    for _ in range(100):
        net = ipaddress.IPv4Network(
            f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}.0/24"
        )
        if str(net.network_address)[:-1] not in used:
            return net
    raise RuntimeError("no free 10.x.y.0/24 for the test's hosts")


@dataclass
class NsHost:
    name: str
    netns: str
    veth: str
    address: str
    cpu: int
    groups: list[Path] = field(default_factory=list)  # v2, cpuset, memory: the worker's own
    worker: subprocess.Popen[bytes] | None = None
    gone: bool = False

    def pids(self) -> list[int]:
        done = _run("ip", "netns", "pids", self.netns, check=False)
        return [int(p) for p in done.stdout.split()]


class NetnsLab:
    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.net = _free_subnet()
        self.bridge = f"mwb{self.tag}"
        self.gateway = str(self.net.network_address + 1)
        self.hosts: list[NsHost] = []
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.port = 0
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")

    @property
    def address(self) -> str:
        return f"tcp://{self.gateway}:{self.port}"

    def start_scheduler(self, worker_ttl: str = "15s") -> None:
        """``dask scheduler`` in the root namespace on the bridge's address only; a lost host
        is noticed after ``worker_ttl`` of silence."""
        self.port = helpers.free_port()
        env = helpers.dask_env()
        env["DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL"] = worker_ttl
        self.scheduler = subprocess.Popen(
            [
                str(helpers.VENV_BIN / "dask"),
                "scheduler",
                "--host",
                self.gateway,
                "--port",
                str(self.port),
                "--no-dashboard",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_for(lambda: _listening(self.gateway, self.port), 30, "the scheduler")

    def add_host(self, name: str, cpu: int) -> NsHost:
        index = len(self.hosts)
        host = NsHost(
            name,
            f"mw{self.tag}-{index}",
            f"mwv{self.tag}{index}",
            str(self.net.network_address + 10 + index),
            cpu,
        )
        self.hosts.append(host)  # before anything is made: close() removes what exists
        peer = f"mwp{self.tag}{index}"
        _run("ip", "netns", "add", host.netns)
        _run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", peer, "netns", host.netns)
        inside = ("ip", "netns", "exec", host.netns)
        _run(*inside, "ip", "link", "set", peer, "name", "eth0")
        _run(*inside, "ip", "addr", "add", f"{host.address}/24", "dev", "eth0")
        _run(*inside, "ip", "link", "set", "eth0", "up")
        _run(*inside, "ip", "link", "set", "lo", "up")
        _run("ip", "link", "set", host.veth, "master", self.bridge)
        _run("ip", "link", "set", host.veth, "up")
        host.groups = self._groups(host)
        return host

    def _groups(self, host: NsHost) -> list[Path]:
        """The host's own cgroup2 group, cpuset group (its one CPU) and memory group, made
        under this process's own groups."""
        made = []
        label = f"metewand-nstest-{self.tag}-{host.name}"
        for fstype, mountpoint, options in _mounts():
            controller = "" if fstype == "cgroup2" else _v1_options(options)
            if controller not in ("", "cpuset", "memory"):
                continue
            own = _own_group(controller)
            if own is None:
                continue
            group = Path(mountpoint) / own.lstrip("/") / label
            group.mkdir()
            made.append(group)
            if controller == "cpuset":  # mems before cpus, both before any member
                (group / "cpuset.mems").write_text((group.parent / "cpuset.mems").read_text())
                (group / "cpuset.cpus").write_text(str(host.cpu))
        return made

    def start_worker(self, host: NsHost, env_extra: dict[str, str] | None = None) -> None:
        """The host's ``dask worker``, as docs/dask.md starts one, inside the host."""
        join = " && ".join(f"echo $$ > {shlex.quote(str(g / 'cgroup.procs'))}" for g in host.groups)
        worker = [
            str(helpers.VENV_BIN / "dask"),
            "worker",
            self.address,
            "--name",
            host.name,
            "--nworkers",
            "1",
            "--nthreads",
            "1",
            "--no-nanny",
            "--no-dashboard",
            "--host",
            host.address,
            "--resources",
            "metewand-host=1",
        ]
        inner = (
            f"{remount_cgroups_script()} && hostname {shlex.quote(host.name)} && "
            f"exec {shlex.join(worker)}"
        )
        outer = (
            f"{join} && exec ip netns exec {shlex.quote(host.netns)} unshare --uts "
            f"sh -c {shlex.quote(inner)}"
        )
        env = helpers.dask_env()
        env.update(env_extra or {})
        host.worker = subprocess.Popen(
            ["sh", "-c", outer],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def tear_down(self, host: NsHost) -> None:
        """The host is lost: its link first (nothing more reaches the scheduler), then every
        process in it, then the namespace, its veth and its groups."""
        if host.gone:
            return
        host.gone = True
        _run("ip", "link", "set", host.veth, "down", check=False)
        for _ in range(50):
            pids = host.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        if host.worker is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                host.worker.wait(timeout=10)
        _run("ip", "netns", "delete", host.netns, check=False)
        _run("ip", "link", "delete", host.veth, check=False)
        for group in reversed(host.groups):
            _remove_group(group)

    def close(self) -> None:
        for host in self.hosts:
            self.tear_down(host)
        if self.scheduler is not None:
            helpers.stop(self.scheduler)
        _run("ip", "link", "delete", self.bridge, check=False)


def _remove_group(group: Path) -> None:
    """A group and every group under it, members killed first (deepest first)."""
    if not group.exists():
        return
    for _ in range(50):
        below = sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        members = []
        for path in [*below, group]:
            with contextlib.suppress(OSError):
                members += [int(p) for p in (path / "cgroup.procs").read_text().split()]
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for path in [*below, group]:
            with contextlib.suppress(OSError):
                path.rmdir()
        if not group.exists():
            return
        time.sleep(0.1)


def _listening(address: str, port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((address, port)) == 0


def _wait_for(ready: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} not ready after {timeout_s} s")
