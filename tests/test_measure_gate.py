"""measure.gate on real processes and real cgroups: a command started through the gate runs
inside its groups from its first instruction, reads its own stdin from the first byte after the
gate line, never runs when the gate line never comes, and a missing program still fails the
start."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from metewand.measure import gate
from metewand.measure.accounting import AccountingUnavailable, CgroupAccounting, open_accounting

# The command reports the groups it was in at its first Python instruction, then echoes stdin.
REPORT = "import sys; print(open('/proc/self/cgroup').read()); print(sys.stdin.read(), end='')"


@pytest.fixture
def groups() -> Iterator[CgroupAccounting]:
    try:
        accounting = open_accounting("auto", label="gate")
    except AccountingUnavailable as exc:
        pytest.skip(f"no accounting here: {exc.reason}")
    if not isinstance(accounting, CgroupAccounting):
        accounting.close()
        pytest.skip(f"no cgroups to join here (backend {accounting.backend})")
    try:
        yield accounting
    finally:
        accounting.close()


def _start(argv: list[str], cwd: str | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        gate.gated_argv(argv, os.environ, cwd),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        start_new_session=True,
    )


def test_the_command_starts_inside_its_groups_and_reads_its_own_input(
    groups: CgroupAccounting,
) -> None:
    assert gate.unavailable_reason() is None
    process = _start([sys.executable, "-c", REPORT])
    groups.attach(process.pid)  # the shell waits at the gate meanwhile
    out, err = process.communicate(gate.GATE_LINE + b'{"payload": 1}', timeout=30)
    assert process.returncode == 0, err
    membership, echoed = out.decode().rsplit("\n\n", 1)
    for group in groups.groups:
        name = "/" + os.path.basename(group.path)  # each group is made for this one command
        assert any(line.endswith(name) for line in membership.splitlines()), (name, membership)
    assert echoed == '{"payload": 1}'
    assert (groups.cpu().total.value or 0) > 0


def test_without_the_gate_line_the_command_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    process = _start(["touch", str(marker)])
    process.stdin.close()  # type: ignore[union-attr]  # the caller died before the line
    assert process.wait(timeout=30) == gate.GATE_EXIT
    assert not marker.exists()
    wrong = _start(["touch", str(marker)])
    wrong.communicate(b"no\n", timeout=30)
    assert wrong.returncode == gate.GATE_EXIT and not marker.exists()


def test_a_missing_program_fails_the_start_as_subprocess_would(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        gate.gated_argv(["metewand-no-such-program"], os.environ, None)
    with pytest.raises(FileNotFoundError):
        gate.gated_argv(["./missing"], os.environ, str(tmp_path))
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        gate.gated_argv(["./not-executable"], os.environ, str(tmp_path))
    script.chmod(0o755)
    process = _start(["./not-executable"], cwd=str(tmp_path))
    process.communicate(gate.GATE_LINE, timeout=30)
    assert process.returncode == 0
