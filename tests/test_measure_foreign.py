"""issue 17 for ``metewand measure``: the same host telemetry and pollution gate as suite runs.

A real niced CPU burner (~0.5 core) started by the test, outside the measurement, trips
``foreign_cpu_load`` and is named by pid and comm in the terminal warning and in the JSON; the
measured commands' own CPU is never foreign. Seven other engineers share this 2-core host, so
the run without the burner asserts what does not depend on them (see tests/test_foreign_runs.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from foreign_helpers import BURNER_COMM, RunProcesses, assert_own_never_foreign, burner, named_pids
from metewand import canonical
from metewand.runtime import schemas

pytestmark = pytest.mark.slow
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.25: pass"


def _measure(tmp_path: Path, watch: RunProcesses) -> tuple[subprocess.CompletedProcess[str], dict]:
    """12 runs of a 0.25 s CPU burn (~3-6 s), host samples every 0.5 s."""
    out = tmp_path / "runs.json"
    argv = [str(Path(sys.executable).with_name("metewand")), "measure", "--runs", "12"]
    argv += ["--host-sample-interval-s", "0.5", "--export-json", str(out), "--"]
    argv += [sys.executable, "-c", BURN]
    proc = subprocess.Popen(
        argv, env=watch.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watch.root = proc.pid
    stdout, stderr = proc.communicate(timeout=300)
    done = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    assert done.returncode == 0, stderr
    result = canonical.loads(out.read_bytes())
    assert schemas.violations("metewand_measure_series-2", result) == []
    return done, result


def test_burner_beside_measure_trips_foreign_cpu_load_and_is_named(tmp_path: Path) -> None:
    with burner() as hog, RunProcesses() as watch:
        done, result = _measure(tmp_path, watch)
    host = result["host"]
    assert host["foreign_cpu"]["threshold_cores"] == 0.1
    assert "foreign_cpu_load" in [t["condition"] for t in host["gate"]["triggered"]]
    assert named_pids(host["telemetry"]).get(hog.pid) == BURNER_COMM
    assert f"{BURNER_COMM}[{hog.pid}]" in done.stdout  # the terminal warning names it
    assert "warning: the host was polluted" in done.stdout and "foreign_cpu_load" in done.stdout
    assert_own_never_foreign(host["telemetry"], watch.pids)


def test_measured_commands_are_never_foreign(tmp_path: Path) -> None:
    with RunProcesses() as watch:
        done, result = _measure(tmp_path, watch)
    samples = result["host"]["telemetry"]
    assert_own_never_foreign(samples, watch.pids)
    assert len(watch.pids) >= 3  # metewand and its measured runs: all its own
    assert samples[0]["unavailable"]["foreign_cpu"]["reason"] == "not_started"
    polluted = not result["host"]["gate"]["passed"]
    assert ("host was polluted" in done.stdout) == polluted
