"""metewand doctor on this machine: names the cgroup layout and the backend a run would use."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from metewand import canonical
from metewand.cli.doctor_cmd import layout_name
from metewand.cli.main import cli
from metewand.measure.cgroups import detect_layout


def _expected_layout() -> str:
    unified = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    v1 = any(Path("/sys/fs/cgroup", c, "tasks").exists() for c in ("cpuacct", "memory", "pids"))
    if unified:
        return "unified"
    return "hybrid" if Path("/sys/fs/cgroup/unified").is_dir() and v1 else "legacy"


def test_doctor_json_names_layout_and_backend() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--json", "--engines", "", "--foreign-look-s", "0"])
    assert result.exit_code in (0, 3), result.output
    report = canonical.loads(result.stdout)
    assert report["cgroup_layout"]["name"] == _expected_layout()
    assert report["cgroup_layout"]["name"] == layout_name(detect_layout())
    assert report["accounting"]["backend"] in ("cgroup2", "cgroup1", "proc")
    assert set(report["system"]["psi"]) == {"cpu", "memory", "io"}
    assert result.stdout.strip().encode() == canonical.dumps(report)


def test_doctor_on_this_hybrid_host_uses_cgroup2_with_v1_memory() -> None:
    """This machine: cgroup2 without memory controller beside v1 memory (docs/DESIGN.md)."""
    if _expected_layout() != "hybrid":
        import pytest

        pytest.skip("not a hybrid cgroup host")
    result = CliRunner().invoke(cli, ["doctor", "--engines", "", "--foreign-look-s", "0"])
    assert "cgroup layout: hybrid" in result.output
    assert "accounting backend: cgroup2 (memory from cgroup1:memory)" in result.output


def test_doctor_reports_missing_engine_with_fix_and_exit_3() -> None:
    result = CliRunner().invoke(
        cli, ["doctor", "--json", "--engines", "moli", "--foreign-look-s", "0"]
    )
    assert result.exit_code == 3
    report = canonical.loads(result.stdout)
    problem = [p for p in report["problems"] if "moli" in p["message"]]
    assert problem and problem[0]["severity"] == "required" and problem[0]["fix"]


def test_doctor_names_how_process_exits_are_waited_for() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--json", "--engines", "", "--foreign-look-s", "0"])
    report = canonical.loads(result.stdout)
    assert report["system"]["exit_wait"] == {"method": "pidfd", "reason": None}  # Linux ≥ 5.3
    human = CliRunner().invoke(cli, ["doctor", "--engines", "", "--foreign-look-s", "0"])
    assert "process exit wait: pidfd" in human.output
