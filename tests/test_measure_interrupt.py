"""Issue 12 item 2: ``metewand measure`` stopped by SIGTERM or SIGINT kills its subject's whole
tree, removes its accounting groups and exits 130. A real subprocess, real cgroups."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compute_helpers import alive

# The subject forks a grandchild in a new session (no process-group signal reaches it) and both
# write their pids, then sleep.
SUBJECT = """
import os, subprocess, sys, time
child = subprocess.Popen(["sleep", "120"], start_new_session=True)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}")
time.sleep(120)
"""


def groups_of(pid: int) -> list[str]:
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(root, d) for d in dirs if f"-{pid}-" in d and "metewand-" in d]
    return found


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_measure_stopped_by_a_signal_leaves_nothing_and_exits_130(
    tmp_path: Path, signum: int
) -> None:
    pids_file = tmp_path / "pids"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "metewand",
            "measure",
            "--",
            sys.executable,
            "-c",
            SUBJECT,
            str(pids_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (pids_file.exists() and len(pids_file.read_text().split()) == 2):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    subject, grandchild = map(int, pids_file.read_text().split())
    assert groups_of(proc.pid)  # the measurement's groups exist while it runs
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not alive(subject) and not alive(grandchild)
    assert groups_of(proc.pid) == []
