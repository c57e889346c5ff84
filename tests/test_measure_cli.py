"""``metewand measure`` end to end, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from metewand import canonical
from metewand.measure import orphans
from metewand.measure.cgroups import detect_layout
from metewand.measure.forms import from_json
from metewand.measure.subject import MEASUREMENT_FIELDS

METEWAND = str(Path(sys.executable).with_name("metewand"))


def measure(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([METEWAND, "measure", *args], capture_output=True, timeout=60)


def test_json_output_is_one_canonical_object_with_every_form() -> None:
    done = measure("--json", "--", sys.executable, "-c", "sum(range(10**6))")
    assert done.returncode == 0, done.stderr
    obj = canonical.loads(done.stdout)
    assert canonical.line(obj) == done.stdout  # exactly canonical bytes, one line
    for name in MEASUREMENT_FIELDS:
        form = from_json(obj[name])  # each field is a valid wire form
        assert obj["sources"][name]
        if form.value is None:
            assert form.reason is not None
    assert obj["cpu_time_ns"]["value"] > 0
    assert obj["exit_status"] == 0 and obj["signal"] is None
    assert obj["backend"] in ("cgroup2", "cgroup1", "proc")
    assert isinstance(obj["quality_flags"], list)


def test_exit_status_and_signal_pass_through() -> None:
    assert measure("--", "sh", "-c", "exit 5").returncode == 5
    killed = measure("--json", "--", "sh", "-c", "kill -TERM $$")
    assert killed.returncode == 128 + 15
    obj = canonical.loads(killed.stdout)
    assert obj["signal"] == 15 and obj["signal_name"] == "SIGTERM" and obj["exit_status"] is None


def test_command_that_cannot_start_is_a_clear_error() -> None:
    missing = measure("--", "/nonexistent/metewand-no-such-command")
    assert missing.returncode == 127
    assert b"cannot start" in missing.stderr and missing.stdout == b""
    not_exec = measure("--", "/etc/hostname")
    assert not_exec.returncode == 126 and b"cannot start" in not_exec.stderr


def test_table_goes_to_stderr_and_leaves_stdout_to_the_command() -> None:
    done = measure("--backend", "proc", "--", "echo", "hello")
    assert done.returncode == 0
    assert done.stdout == b"hello\n"
    assert b"CPU, user + system (whole tree)" in done.stderr and b"process_only" in done.stderr
    assert b"cpu_time_ns" not in done.stderr  # readable labels, not field names


def test_no_subject_groups_are_left_behind() -> None:
    proc = subprocess.Popen([METEWAND, "measure", "--", "true"], stdout=subprocess.DEVNULL)
    assert proc.wait(timeout=60) == 0
    layout = detect_layout()
    dirs = [h.own_dir for h in [layout.v2, *layout.v1.values()] if h and h.own_dir]
    for directory in dirs:
        leftovers = [n for n in os.listdir(directory) if n.startswith("metewand-")]
        # The name says who made it (measure.orphans): this measure's groups must all be gone
        # (another test's live groups, or orphans a killed run left on purpose, are not its)
        ours = [n for n in leftovers if (orphans.creator_of(n) or (0,))[0] == proc.pid]
        assert not ours, (directory, ours)
