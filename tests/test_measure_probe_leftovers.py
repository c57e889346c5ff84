"""Issue 12 item 2 (found by the kill -9 soak): a metewand killed between the mkdir and rmdir of
its writability probe left an empty ``metewand-probe-<pid>-…`` group for ever; the next layout
detection removes probes whose creator is gone and leaves a live process's alone. Real cgroups."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from metewand.measure.cgroups import PROBE_PREFIX, detect_layout


def test_a_dead_creators_probe_group_is_removed_a_live_ones_kept() -> None:
    layout = detect_layout()
    if layout.v2 is None or layout.v2.own_dir is None or not layout.v2.writable:
        pytest.skip("no writable cgroup2 group here")
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = os.path.join(layout.v2.own_dir, f"{PROBE_PREFIX}{gone.pid}-deadbeef")
    live = os.path.join(layout.v2.own_dir, f"{PROBE_PREFIX}{os.getpid()}-livebeef")
    os.mkdir(dead)
    os.mkdir(live)
    try:
        detect_layout()
        assert not os.path.exists(dead)
        assert os.path.isdir(live)
    finally:
        for path in (dead, live):
            if os.path.isdir(path):
                os.rmdir(path)


def test_accounting_opens_probe_the_hierarchies_once_per_process_and_layout() -> None:
    """open_accounting asks the cached layout: a second open makes no probe group, while
    detect_layout (doctor, host facts) still probes afresh. Counted from a child process's
    own mkdir calls, so no earlier open in this test process hides the first probe."""
    script = (
        "import os\n"
        "from metewand.measure import cgroups\n"
        "from metewand.measure.accounting import open_accounting\n"
        "made = []\n"
        "real = os.mkdir\n"
        "def counting(path, *a, **k):\n"
        "    made.append(os.path.basename(path))\n"
        "    return real(path, *a, **k)\n"
        "os.mkdir = counting\n"
        "counts = []\n"
        "for _ in range(3):\n"
        "    before = len(made)\n"
        "    open_accounting('auto', label='layout-once').close()\n"
        "    counts.append(sum(n.startswith(cgroups.PROBE_PREFIX) for n in made[before:]))\n"
        "before = len(made)\n"
        "cgroups.detect_layout()\n"
        "counts.append(sum(n.startswith(cgroups.PROBE_PREFIX) for n in made[before:]))\n"
        "print(*counts)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    first, second, third, fresh = map(int, done.stdout.split())
    if first == 0:
        pytest.skip("no writable cgroup hierarchy here: nothing is probed")
    assert (second, third) == (0, 0)
    assert fresh == first
