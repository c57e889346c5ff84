"""Issue #16 (compute): phase marks inside one attempt, checked against a real CPU-burning worker.

The burn worker spins on its own thread's CPU clock: prepare 200 ms, execute 100 ms, evaluation
50 ms, and times each request's handling on its process CPU clock. On the cgroup backends each
phase's group CPU is within ±5% of the burn of what the worker says it used for that request (the
burn plus the request's own work, which a loaded CI host once made 8 ms where it is 1 ms when
quiet), and each group's phases plus its "between marks" rest are exactly its total.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from compute_helpers import problem, python_impl, run, write_manifest
from metewand.measure.accounting import AccountingUnavailable, open_accounting
from metewand.runtime import schemas
from shared_paths import REPO_ROOT

METEWAND = REPO_ROOT / ".venv" / "bin" / "metewand"
BURN_MS = {"prepare": 200, "execute": 100, "evaluation": 50}
REQUEST_OF_PHASE = {"prepare": "prepare", "execute": "execute", "evaluation": "evaluate"}
TOLERANCE = 0.05


def _manifest(tmp_path: Path, reuse: bool = False) -> Path:
    policy = "\nworker_reuse = true" if reuse else ""
    path = write_manifest(
        tmp_path,
        problem(mode="burn")
        + python_impl("burner", "burn")
        + f"""
[execution_policies.warm]
timing_scope = "prepare_and_execute"{policy}

[[experiments]]
name = "burn"
problem = "answer"
implementations = ["burner"]
execution_policy = "warm"
""",
    )
    burn = 'METEWAND_TEST_MODE = "burn"'
    log = f'METEWAND_TEST_CPU_LOG = "{_cpu_log(tmp_path)}"'
    path.write_text(path.read_text().replace(burn, f"{burn}, {log}"))
    return path


def _cpu_log(tmp_path: Path) -> Path:
    return tmp_path / "request-cpu.jsonl"


def _request_cpu(tmp_path: Path) -> dict[str, int]:
    """What the workers' own process clocks say each request's handling used (one of each)."""
    lines = [json.loads(line) for line in _cpu_log(tmp_path).read_text().splitlines()]
    used = {entry["method"]: entry["cpu_ns"] for entry in lines if entry["method"] != "hello"}
    assert sorted(used) == sorted(REQUEST_OF_PHASE.values()), lines
    return used


def _usable(backend: str) -> bool:
    try:
        open_accounting(backend, label="mw-phases-probe").close()
    except AccountingUnavailable:
        return False
    return True


def _by_name(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {phase["name"]: phase for phase in record["phases"]}


def _cpu(span: dict[str, Any]) -> int:
    assert span["cpu_time_ns"]["status"] == "complete", span
    value = span["cpu_time_ns"]["value"]
    assert isinstance(value, int)
    return value


@pytest.mark.parametrize("backend", ["cgroup2", "cgroup1"])
def test_each_phase_holds_the_cpu_its_worker_burned(tmp_path: Path, backend: str) -> None:
    if not _usable(backend):
        pytest.skip(f"{backend} accounting is not usable on this host")
    summary = run(_manifest(tmp_path), tmp_path, accounting_backend=backend)
    (row,) = summary.rows
    assert row["status"] == "accepted", row["message"]
    phases = row["phases"]
    assert schemas.violations("metewand_attempt_phases-1", phases) == []
    impl, evaluator = phases["implementation"], phases["evaluator"]
    assert list(_by_name(impl)) == ["worker_startup", "prepare", "integrity_check", "execute"]
    assert list(_by_name(evaluator)) == ["evaluator_startup", "evaluation"]
    burned = {
        "prepare": _cpu(_by_name(impl)["prepare"]),
        "execute": _cpu(_by_name(impl)["execute"]),
        "evaluation": _cpu(_by_name(evaluator)["evaluation"]),
    }
    request_cpu = _request_cpu(tmp_path)
    for name, ms in BURN_MS.items():
        burn_ns, used = ms * 1_000_000, request_cpu[REQUEST_OF_PHASE[name]]
        assert used >= burn_ns, (name, used)
        assert abs(burned[name] - used) <= TOLERANCE * burn_ns, (name, burned[name], used)
    for record in (impl, evaluator):
        _adds_up_or_names_the_rest(record)


def _adds_up_or_names_the_rest(record: dict[str, Any]) -> None:
    """Phases + between marks = total, exactly; within 1% the record says the CPU adds up."""
    total = _cpu(record["total"])
    phases = sum(_cpu(p) for p in record["phases"])
    rest = _cpu(record["between_marks"])
    assert phases + rest == total
    assert record["cpu_adds_up"] == (abs(rest) <= 0.01 * total)


def test_a_reused_worker_has_no_startup_phase_after_its_first_attempt(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, reuse=True)
    reps = 'execution_policy = "warm"\nrepetitions = 2'
    manifest.write_text(manifest.read_text().replace('execution_policy = "warm"', reps))
    summary = run(manifest, tmp_path)
    seen = set()
    for row in summary.rows:
        reused = row["record"]["provenance"]["data"]["context"]["worker"]["reused"]
        names = [p["name"] for p in row["phases"]["implementation"]["phases"]]
        first = [] if reused else ["worker_startup"]
        assert names == [*first, "prepare", "integrity_check", "execute"], (reused, names)
        seen.add(reused)
    assert seen == {False, True}


def test_without_accounting_each_group_says_why(tmp_path: Path) -> None:
    summary = run(_manifest(tmp_path), tmp_path, accounting_backend="none")
    (row,) = summary.rows
    phases = row["phases"]
    assert schemas.violations("metewand_attempt_phases-1", phases) == []
    assert phases["implementation"] == {"status": "unavailable", "reason": "accounting_unavailable"}
    # the evaluator's group only contains its tree, so it still has counters to read
    assert [p["name"] for p in phases["evaluator"]["phases"]] == ["evaluator_startup", "evaluation"]


def test_a_crash_in_execute_still_records_the_phases_up_to_it(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        problem()
        + python_impl("crasher", "crash")
        + """
[[experiments]]
name = "crash"
problem = "answer"
implementations = ["crasher"]
""",
    )
    (row,) = run(manifest, tmp_path).rows
    assert row["status"] == "failed" and row["code"] == "implementation_crash"
    phases = row["phases"]
    assert schemas.violations("metewand_attempt_phases-1", phases) == []
    names = [p["name"] for p in phases["implementation"]["phases"]]
    assert names == ["worker_startup", "prepare", "integrity_check", "execute"]
    # the evaluator was started but never asked to evaluate
    assert [p["name"] for p in phases["evaluator"]["phases"]] == ["evaluator_startup"]


MiB = 1 << 20


def _peak(span: dict[str, Any]) -> int:
    assert span["memory_peak_bytes"]["status"] == "complete", span
    value = span["memory_peak_bytes"]["value"]
    assert isinstance(value, int)
    return value


@pytest.mark.parametrize("backend", ["cgroup2", "cgroup1"])
def test_each_phase_has_its_own_memory_high_water_and_the_attempt_keeps_the_highest(
    tmp_path: Path, backend: str
) -> None:
    """prepare fills 96 MiB and frees it, execute 24 MiB: the high-water restarts at each mark,
    so execute's peak is far below prepare's, while the row's tree high-water (read after the
    restarts) and the worker's own VmHWM still hold prepare's."""
    if not _usable(backend):
        pytest.skip(f"{backend} accounting is not usable on this host")
    manifest = write_manifest(
        tmp_path,
        problem()
        + python_impl("filler", "memory")
        + """
[[experiments]]
name = "memory"
problem = "answer"
implementations = ["filler"]
""",
    )
    (row,) = run(manifest, tmp_path, accounting_backend=backend).rows
    assert row["status"] == "accepted", row["message"]
    impl = row["phases"]["implementation"]
    assert schemas.violations("metewand_attempt_phases-1", row["phases"]) == []
    if impl["memory_peak_method"].startswith("unavailable"):
        pytest.skip(f"{backend}: {impl['memory_peak_method']}")
    phases = _by_name(impl)
    prepare, execute = _peak(phases["prepare"]), _peak(phases["execute"])
    baseline = phases["prepare"]["memory_rise_bytes"]["value"]  # signed, near 0 after the free
    assert abs(baseline) < 16 * MiB
    assert prepare >= 96 * MiB
    assert 24 * MiB <= execute <= prepare - 60 * MiB  # not the 96 MiB of prepare
    spans = [*impl["phases"]]
    assert _peak(impl["total"]) == max(_peak(s) for s in spans) == prepare
    data = row["record"]["provenance"]["data"]
    tree = data["tree_memory"]["kernel_tree_memory_high_water_bytes"]
    assert tree["status"] == "complete" and tree["value"] >= prepare
    rss = data["measurements"]["peak_rss_bytes"]
    assert rss["reason"] == "process_only" and rss["value"] >= 96 * MiB
    # compare reads a phase's high-water like its wall and CPU
    (run_dir,) = (str(p.parent) for p in (tmp_path / "runs").glob("*/results.jsonl"))
    metric = "phase.execute.memory_peak_bytes"
    done = _metewand("compare", run_dir, run_dir, "--metric", metric, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (group,) = json.loads(done.stdout)["groups"]
    assert group["base"]["median"] == execute


def _metewand(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(METEWAND), *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_no_phase_marks_takes_none_records_it_and_a_resume_keeps_it(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    reps = 'execution_policy = "warm"\nrepetitions = 2'
    manifest.write_text(manifest.read_text().replace('execution_policy = "warm"', reps))
    out = ["--out", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    done = _metewand(
        "run", str(manifest), "--run-id", "off", "--no-phase-marks", *out, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "off"
    recorded = json.loads((run_dir / "run_manifest.json").read_text())["data"]
    assert recorded["phase_marks"] is False
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(row["phases"] is None for row in rows)
    # the other flag on resume would mix marked and unmarked attempts in one run: refused
    mixed = _metewand("run", "--resume", "off", "--phase-marks", *out, cwd=tmp_path)
    assert mixed.returncode == 2, mixed.stderr
    assert "--no-phase-marks" in mixed.stderr and "Traceback" not in mixed.stderr
    # without the flag a resume takes the recorded one
    same = _metewand("run", "--resume", "off", *out, cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    # a new run marks by default, and says so
    done = _metewand("run", str(manifest), "--run-id", "on", *out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    on_dir = tmp_path / "runs" / "on"
    assert json.loads((on_dir / "run_manifest.json").read_text())["data"]["phase_marks"] is True
    rows = [json.loads(line) for line in (on_dir / "results.jsonl").read_text().splitlines()]
    assert all(row["phases"]["schema"] == "metewand_attempt_phases/1" for row in rows)
    # compare names the difference in observer between the two runs
    compared = _metewand("compare", str(run_dir), str(on_dir), "--json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    differences = {d["fact"]: d for d in json.loads(compared.stdout)["provenance_differences"]}
    assert (differences["phase_marks"]["base"], differences["phase_marks"]["new"]) == (False, True)
