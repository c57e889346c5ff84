"""metewand doctor on this machine: names the cgroup layout and the backend a run would use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
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


def test_doctor_checks_node_npm_chromedriver_python_clients_and_every_driver_path() -> None:
    from metewand.suites.browser.driver_registry import DRIVER_PATHS

    result = CliRunner().invoke(cli, ["doctor", "--json", "--engines", "", "--foreign-look-s", "0"])
    drivers = canonical.loads(result.stdout)["drivers"]
    node = drivers["node"]
    assert node["found"] == (shutil.which("node") is not None)
    if node["found"]:
        assert node["version"].startswith("v")
    assert drivers["npm_install"]["locked"] > 0
    assert {c["package"] for c in drivers["python_clients"]} == {
        "selenium",
        "pydoll-python",
        "cdp-use",
    }
    paths = {row["driver"]: row for row in drivers["paths"]}
    assert set(paths) == set(DRIVER_PATHS)
    for foreign in ("chromedp", "rod", "chromiumoxide", "ferrum"):
        assert paths[foreign]["found"] is False and paths[foreign]["reason"] == "driver_unavailable"
        assert "no metewand adapter" in paths[foreign]["detail"]
    text = CliRunner().invoke(cli, ["doctor", "--engines", "", "--foreign-look-s", "0"]).output
    assert "driver paths:" in text and "driver chromedp" in text and "npm install:" in text


def test_doctor_names_an_npm_install_that_does_not_match_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = {"packages": {"": {}, "node_modules/left-pad": {"version": "1.3.0"}}}
    (tmp_path / "package-lock.json").write_text(json.dumps(lock))
    monkeypatch.setenv("METEWAND_NODE_DRIVERS", str(tmp_path))
    args = ["doctor", "--json", "--engines", "", "--foreign-look-s", "0"]
    absent = canonical.loads(CliRunner().invoke(cli, args).stdout)
    assert absent["drivers"]["npm_install"]["ok"] is False
    assert "node_modules absent" in absent["drivers"]["npm_install"]["detail"]
    (tmp_path / "node_modules" / "left-pad").mkdir(parents=True)
    (tmp_path / "node_modules" / "left-pad" / "package.json").write_text('{"version": "1.1.0"}')
    stale = canonical.loads(CliRunner().invoke(cli, args).stdout)
    assert "left-pad 1.1.0 (locked 1.3.0)" in stale["drivers"]["npm_install"]["detail"]
    advice = [p for p in stale["problems"] if p["message"].startswith("npm_install")]
    assert advice and advice[0]["severity"] == "advice" and advice[0]["fix"] == "make install"
    skipped = canonical.loads(CliRunner().invoke(cli, [*args, "--no-drivers"]).stdout)
    assert skipped["drivers"] is None


def test_doctor_names_how_process_exits_are_waited_for() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--json", "--engines", "", "--foreign-look-s", "0"])
    report = canonical.loads(result.stdout)
    assert report["system"]["exit_wait"] == {"method": "pidfd", "reason": None}  # Linux ≥ 5.3
    human = CliRunner().invoke(cli, ["doctor", "--engines", "", "--foreign-look-s", "0"])
    assert "process exit wait: pidfd" in human.output


def test_doctor_advises_on_an_unsteady_cpu_with_the_pairs_a_comparison_needs() -> None:
    """The advice follows the probe's figure: this machine's real report, its probe's log SD
    set on each side of the threshold."""
    from metewand.cli.doctor_cmd import UNSTEADY_LOG_SD, build_report, problems_of
    from metewand.measure.cpu_steadiness import pairs_needed

    report = build_report([], 0.0, drivers=False, cpu_probe=True)
    steady = report["cpu_steadiness"]
    for log_sd, advised in ((UNSTEADY_LOG_SD * 3, True), (UNSTEADY_LOG_SD / 2, False)):
        pairs = {"10%": pairs_needed(log_sd, 0.10)}
        report["cpu_steadiness"] = {**steady, "log_sd": log_sd, "pairs_needed": pairs}
        found = [p for p in problems_of(report) if "CPU speed unsteady" in p["message"]]
        assert bool(found) is advised
        if advised:
            assert f"needs about {pairs['10%']} interleaved pairs" in found[0]["message"]
