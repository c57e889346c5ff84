"""The next run's groups made during this run's spawn (measure.spare_accounting), and the
watchdog that guards groups by their names (one ``R`` message per parent): real spawn server,
real cgroups, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from measure_helpers import NO_SPAWNER, require_backend
from metewand.measure import orphans
from metewand.measure.accounting import CgroupAccounting
from metewand.measure.cgroups import detect_layout, own_v2_dir
from metewand.measure.spare_accounting import SpareAccounting
from metewand.measure.spawner import Spawner
from metewand.measure.subject import run_measured
from watchdog_helpers import groups_made_by, wait_groups_gone

pytestmark = NO_SPAWNER


def _mine_in(parents: set[str]) -> list[str]:
    """Groups in ``parents`` whose names say this process made them."""
    me = (os.getpid(), orphans.own_start())
    return [
        entry.path
        for parent in parents
        for entry in os.scandir(parent)
        if orphans.creator_of(entry.name) == me
    ]


def _groups(accounting: object) -> list[str]:
    assert isinstance(accounting, CgroupAccounting)
    return [group.path for group in accounting.groups]


@pytest.mark.parametrize("backend", ["cgroup2", "cgroup1"])
def test_each_run_is_born_in_the_spare_made_during_the_spawn_before(
    backend: str, spawner: Spawner, tmp_path: Path
) -> None:
    require_backend(backend)
    spares = SpareAccounting(backend, detect_layout())
    out = tmp_path / "cgroup"
    command = ["sh", "-c", f"cat /proc/self/cgroup >> {out}; echo --- >> {out}"]
    seen_spares: list[list[str]] = []
    parents: set[str] = set()
    try:
        for _ in range(3):
            report = run_measured(command, backend, spawner=spawner, pss=False, spares=spares)
            assert report.exit_status == 0
            spare = spares._spare
            assert spare is not None and spare[0] == "sh"  # made during this run's spawn
            paths = _groups(spare[1])
            parents |= {os.path.dirname(p) for p in paths}
            seen_spares.append(paths)
            # fresh: no member, no CPU ever charged
            assert spare[1].pids() == []
            assert spare[1].cpu().total.value == 0
        runs = out.read_text().split("---\n")[:-1]
        assert len(runs) == 3
        for made_before, seen in zip(seen_spares[:2], runs[1:], strict=True):
            for path in made_before:  # run k+1 was born in the groups made during run k
                relative = path.split("/sys/fs/cgroup/", 1)[1].split("/", 1)[1]
                assert "/" + relative in seen, (path, seen)
        assert len(set(runs)) == 3  # every run had groups of its own
        # the runs' own groups are gone; only the last spare is left, until close
        assert sorted(_mine_in(parents)) == sorted(seen_spares[-1])
    finally:
        spares.close()
    assert _mine_in(parents) == []


def test_a_spare_made_for_another_command_is_removed_not_used(tmp_path: Path) -> None:
    require_backend("cgroup2")
    spares = SpareAccounting("cgroup2", detect_layout())
    spares.refill("first")
    spare = spares._spare
    assert spare is not None
    made = _groups(spare[1])
    taken = spares.take("second")
    try:
        assert set(_groups(taken)).isdisjoint(made)
        assert all(not os.path.exists(p) for p in made)
        assert all("second" in os.path.basename(p) for p in _groups(taken))
    finally:
        taken.close()
        spares.close()


def test_a_series_leaves_no_group_of_its_own(tmp_path: Path) -> None:
    """``measure --runs 20``: its spare of the last run is removed with the rest."""
    require_backend("cgroup2")
    runner = subprocess.Popen(
        [sys.executable, "-m", "metewand", "measure", "--runs", "20", "--", "true"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, err
    assert groups_made_by(runner.pid) == []


RUNNER = """
import sys, time
from metewand.measure.cgroups import V2Group
group = V2Group.create(sys.argv[1], "rtest")
print(group.path, flush=True)
time.sleep(300)
"""


@pytest.mark.timeout(60)
def test_the_watchdog_removes_a_killed_runners_groups_by_their_names_and_no_others(
    tmp_path: Path,
) -> None:
    """Group.create tells the watchdog the parent once; when the runner is killed, the groups
    there named as the runner's go, and a live process's group beside them stays."""
    require_backend("cgroup2")
    parent = own_v2_dir()
    assert parent is not None
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, parent], stdout=subprocess.PIPE, text=True
    )
    assert runner.stdout is not None
    made = runner.stdout.readline().strip()
    beside = os.path.join(parent, orphans.group_name("beside", os.urandom(4).hex()))
    os.mkdir(beside)  # named as this test's process's: alive, so nothing may remove it
    try:
        assert os.path.isdir(made)
        assert orphans.creator_of(os.path.basename(made))[0] == runner.pid  # type: ignore[index]
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        assert wait_groups_gone([made], 10) == []
        time.sleep(0.2)  # the watchdog's sweep is done once the runner's group is gone
        assert os.path.isdir(beside)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        os.rmdir(beside)
