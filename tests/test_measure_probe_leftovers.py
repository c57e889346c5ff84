"""Issue 12 item 2 (found by the kill -9 soak): a metewand killed between the mkdir and rmdir of
its writability probe left an empty ``metewand-probe-<pid>-…`` group for ever; the next layout
detection removes probes whose creator is gone and leaves a live process's alone. Real cgroups."""

from __future__ import annotations

import os
import subprocess

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
