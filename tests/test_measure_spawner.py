"""The spawn server (measure.spawner) on real processes and real cgroups: a command is born in
its run's groups, the server goes back home, exits and start failures come through, and the
command inherits neither the server's pipes nor its ignored signals."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from measure_helpers import NO_SPAWNER, require_backend
from metewand.measure.accounting import open_accounting
from metewand.measure.cgroups import own_v2_dir
from metewand.measure.forms import Status
from metewand.measure.spawner import WARM_AT_MOST_S, Spawner
from metewand.measure.subject import SubjectStartError, run_measured
from test_measure_accounting import ALLOCATE, CHILD, MIB, PARENT, tree_cpu_slack_ns

pytestmark = NO_SPAWNER


def _cgroup_paths(pid: int) -> set[str]:
    """The lines of /proc/PID/cgroup: one per hierarchy."""
    return set(Path(f"/proc/{pid}/cgroup").read_text().splitlines())


@pytest.mark.parametrize("backend", ["cgroup2", "cgroup1"])
def test_the_command_is_born_in_its_groups_and_the_server_goes_home(
    backend: str, spawner: Spawner, tmp_path: Path
) -> None:
    require_backend(backend)
    home = _cgroup_paths(spawner.pid)
    out = tmp_path / "cgroup"
    accounting = open_accounting(backend, label="spawned")
    try:
        # the command's very first read of its own groups, before it could have been moved
        proc = spawner.start(
            ["sh", "-c", f"cat /proc/self/cgroup > {out}"], accounting.join_paths()
        )
        assert proc.reap() == 0
        proc.close()
        seen = out.read_text()
        for group in accounting.groups:  # type: ignore[attr-defined]
            mount_relative = group.path.split("/sys/fs/cgroup/", 1)[1].split("/", 1)[1]
            assert "/" + mount_relative in seen, (group.path, seen)
    finally:
        accounting.close()
    assert _cgroup_paths(spawner.pid) == home


def test_the_tree_cpu_through_the_spawner_matches_the_sum(spawner: Spawner, tmp_path: Path) -> None:
    """Issue 2's exactness, started through the server: a child the parent never reaps."""
    require_backend("cgroup2")
    out = str(tmp_path / "cpu")
    report = run_measured([sys.executable, "-c", PARENT, out, CHILD], spawner=spawner)
    expected = sum(float(Path(out + s).read_text()) for s in (".parent", ".child")) * 1e9
    cpu = report.measurements["cpu_time_ns"]
    assert cpu.status is Status.COMPLETE
    assert abs(cpu.value - expected) <= tree_cpu_slack_ns(expected), (cpu.value, expected)


def test_the_memory_high_water_covers_an_exited_child(spawner: Spawner) -> None:
    report = run_measured([sys.executable, "-c", ALLOCATE], spawner=spawner)
    peak = report.measurements["peak_memory_bytes"]
    if peak.status is Status.UNAVAILABLE:
        pytest.skip(f"no memory controller: {peak.reason}")
    assert peak.value >= 256 * MIB


def test_exit_status_and_signal_come_through(spawner: Spawner) -> None:
    assert run_measured(["sh", "-c", "exit 3"], spawner=spawner).exit_status == 3
    killed = run_measured(["sh", "-c", "kill -9 $$"], spawner=spawner)
    assert killed.signal == 9 and killed.shell_exit_status == 137


def test_start_failures_are_the_shell_codes(spawner: Spawner, tmp_path: Path) -> None:
    with pytest.raises(SubjectStartError) as missing:
        run_measured(["metewand-no-such-command-xyz"], spawner=spawner)
    assert missing.value.exit_code == 127
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(SubjectStartError) as denied:
        run_measured([str(script)], spawner=spawner)
    assert denied.value.exit_code == 126
    # the server still serves after both failures
    assert run_measured(["true"], spawner=spawner).exit_status == 0


def _ignored_signals(status_text: str) -> int:
    return int(next(x for x in status_text.splitlines() if x.startswith("SigIgn:")).split()[1], 16)


def test_the_command_inherits_no_pipe_and_no_ignored_signal(
    spawner: Spawner, tmp_path: Path
) -> None:
    out = tmp_path / "seen"
    script = f"ls -l /proc/$$/fd > {out}.fd; cat /proc/$$/status > {out}.status"
    assert run_measured(["sh", "-c", script], spawner=spawner).exit_status == 0
    # the server's own pipe ends are the two descriptors named on its command line
    own_fds = Path(f"/proc/{spawner.pid}/cmdline").read_bytes().split(b"\0")[-3:-1]
    server_pipes = {os.readlink(f"/proc/{spawner.pid}/fd/{int(fd)}") for fd in own_fds}
    assert all(target.startswith("pipe:") for target in server_pipes)
    seen_fds = Path(f"{out}.fd").read_text()
    assert not any(pipe in seen_fds for pipe in server_pipes), (server_pipes, seen_fds)
    # No standard signal ignored that the user did not ignore: the server ignores SIGINT and
    # Python SIGPIPE and SIGXFSZ, and the spawn restores all three; what this test's own caller
    # ignored (SIGHUP under nohup) passes on, as it does to hyperfine's children. (glibc's
    # posix_spawn leaves its own internal signals 32 and 33 ignored; hyperfine's too.)
    standard = (1 << 31) - 1
    restored = sum(1 << (s - 1) for s in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ))
    inherited = _ignored_signals(Path("/proc/self/status").read_text()) & standard & ~restored
    ignored = _ignored_signals(Path(f"{out}.status").read_text())
    assert ignored & standard == inherited, (hex(ignored), hex(inherited))


def test_env_cwd_and_quiet_reach_the_command(
    spawner: Spawner, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "seen"
    env = {"PATH": os.environ["PATH"], "METEWAND_SPAWN_TEST": "yes"}
    script = f'echo "$METEWAND_SPAWN_TEST $(pwd)" > {out}; echo loud; echo louder >&2'
    report = run_measured(
        ["sh", "-c", script], spawner=spawner, env=env, cwd=str(tmp_path), discard_output=True
    )
    assert report.exit_status == 0
    assert out.read_text().split() == ["yes", str(tmp_path)]
    captured = capfd.readouterr()
    assert "loud" not in captured.out and "louder" not in captured.err
    assert Path(f"/proc/{spawner.pid}/cwd").resolve() == Path.cwd().resolve()  # back home


def test_close_ends_the_server(tmp_path: Path) -> None:
    server = Spawner()
    pid = server.pid
    server.close()
    assert not Path(f"/proc/{pid}").exists()


def test_a_server_that_cannot_start_falls_back_to_the_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fault injection: no interpreter where the server would run. The series still runs,
    through the fork with a pre-exec join, and says so with the reason."""
    from metewand.measure import spawner as spawner_module
    from metewand.measure.series import Command, SeriesOptions, run_all

    monkeypatch.setattr(spawner_module.sys, "executable", "/nonexistent/metewand-python")
    assert spawner_module.open_spawner() is None
    method = spawner_module.start_method(None)
    assert method["method"] == "fork_preexec"
    assert "could not start" in str(method["reason"])
    outcome = run_all([Command("true", ("true",))], SeriesOptions(runs=3))
    assert [run["exit_status"] for run in outcome.series[0].runs] == [0, 0, 0]


def test_without_env_the_command_gets_metewands_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("METEWAND_SPAWN_INHERITED", "from-metewand")
    out = tmp_path / "seen"
    with Spawner() as server:  # started after the change: it has metewand's environment
        report = run_measured(
            ["sh", "-c", f'echo "$METEWAND_SPAWN_INHERITED" > {out}'], spawner=server
        )
    assert report.exit_status == 0
    assert out.read_text().strip() == "from-metewand"


def _ends_within(thread: threading.Thread, seconds: float) -> bool:
    thread.join(seconds)
    return not thread.is_alive()


def test_the_move_lock_warmer_runs_until_the_first_join_and_moves_nothing(
    tmp_path: Path,
) -> None:
    """From the server's start to the first command's join, this process is moved into its own
    cgroup2 group every few ms (a move that changes nothing: its groups stay as they were); the
    first join stops it."""
    require_backend("cgroup2")
    group = own_v2_dir()
    if group is None or not os.access(os.path.join(group, "cgroup.procs"), os.W_OK):
        pytest.skip(f"this process's cgroup2 group cannot be written here: {group}")
    mine = _cgroup_paths(os.getpid())
    with Spawner() as server:
        warm = server.move_warmer.thread
        assert warm is not None and not server.move_warmer.stopped
        accounting = open_accounting("cgroup2", label="warm")
        try:
            proc = server.start(["true"], accounting.join_paths())
            assert proc.reap() == 0
            proc.close()
        finally:
            accounting.close()
        assert server.move_warmer.stopped  # the join stopped it
        assert _ends_within(warm, 2.0)
    assert _cgroup_paths(os.getpid()) == mine


def test_the_move_lock_warmer_stops_by_itself(tmp_path: Path) -> None:
    """A spawner that never joins (the proc backend) moves nothing after WARM_AT_MOST_S."""
    with Spawner() as server:
        warm = server.move_warmer.thread
        assert _ends_within(warm, WARM_AT_MOST_S + 3.0)
        assert not server.move_warmer.stopped  # it ended by its cap, not by a stop
