"""peak_rss_bytes keeps the document's meaning (the implementation process's VmHWM, partial
process_only) and the kernel's tree memory high-water is a separate record beside it; resource
reasons follow the document's vocabulary. Real workers, real cgroups, real /proc."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compute_helpers import FAULT, WORKERS
from metewand.measure.cgroups import detect_layout
from metewand.runtime import schemas
from metewand.suites.compute import workers
from metewand.suites.compute.api import (
    FixedDatasetFailure,
    FixedDatasetResult,
    run_fixed_dataset_outcome,
)
from metewand.suites.compute.payload import observation_timing

SCRATCH = WORKERS / "scratch_worker.py"
MiB = 1 << 20


def _run(
    tmp_path: Path, impl: Path, mode: str = "ok", **kwargs: object
) -> FixedDatasetResult | FixedDatasetFailure:
    dataset = tmp_path / "dataset"
    dataset.mkdir(exist_ok=True)
    return run_fixed_dataset_outcome(
        str(dataset),
        [sys.executable, str(impl), "impl"],
        [sys.executable, str(FAULT), "eval"],
        private_root=str(tmp_path),
        timeout_s=60.0,
        env={"METEWAND_TEST_MODE": mode, "METEWAND_SCRATCH_MB": "150"},
        **kwargs,  # type: ignore[arg-type]
    )


def _cgroup_memory_usable() -> bool:
    layout = detect_layout()
    v2_memory = layout.v2 is not None and "memory" in layout.v2.controllers
    return v2_memory or layout.v1_usable("memory")


@pytest.mark.skipif(not _cgroup_memory_usable(), reason="no cgroup memory controller here")
def test_page_cache_shows_only_in_the_kernel_tree_high_water(tmp_path: Path) -> None:
    outcome = _run(tmp_path, SCRATCH)
    assert isinstance(outcome, FixedDatasetResult), outcome
    m = outcome.measurements
    own_hwm = outcome.statistics["vm_hwm_bytes"]  # what the worker read of itself
    # peak_rss_bytes is the worker's own VmHWM: partial process_only, tens of MB, not 150+.
    assert m.peak_rss_bytes.status == "partial" and m.peak_rss_bytes.reason == "process_only"
    assert m.peak_rss_bytes.value is not None
    assert own_hwm <= m.peak_rss_bytes.value <= own_hwm + 4 * MiB
    assert m.peak_rss_bytes.value < 100 * MiB
    # The kernel charged the 150 MiB of page cache to the tree: only the separate field has it.
    tree = outcome.tree_memory.to_json()
    assert schemas.violations("tree-memory", tree) == []
    high_water = tree["kernel_tree_memory_high_water_bytes"]
    assert high_water["status"] == "complete"
    assert high_water["value"] >= 150 * MiB
    assert high_water["value"] - m.peak_rss_bytes.value >= 120 * MiB
    # Tree CPU from a cgroup stays complete; the observation's peak_rss_bytes stays null.
    assert m.cpu_time_ns.status == "complete"
    timing = observation_timing(m, outcome.implementation_time_ns)
    assert timing["peak_rss_bytes"] is None and timing["cpu_time_ns"] == m.cpu_time_ns.value


def test_accounting_disabled_is_accounting_unavailable(tmp_path: Path) -> None:
    outcome = _run(tmp_path, FAULT, accounting_backend="none")
    assert isinstance(outcome, FixedDatasetResult), outcome
    m = outcome.measurements.to_json()
    for name in ("cpu_time_ns", "peak_rss_bytes"):
        assert m[name] == {"status": "unavailable", "reason": "accounting_unavailable"}
    assert m["accounting_backend"] == "none"
    tree = outcome.tree_memory.to_json()["kernel_tree_memory_high_water_bytes"]
    assert tree == {"status": "unavailable", "reason": "accounting_unavailable"}


def test_a_worker_that_exited_has_no_high_water_to_read(tmp_path: Path) -> None:
    # The worker exits 17 inside execute: its /proc entry is gone, so VmHWM cannot be read.
    outcome = _run(tmp_path, FAULT, mode="crash", accounting_backend="proc")
    assert isinstance(outcome, FixedDatasetFailure)
    m = outcome.measurements.to_json()
    assert m["peak_rss_bytes"] == {"status": "unavailable", "reason": "accounting_unavailable"}
    assert m["cpu_time_ns"] == {"status": "unavailable", "reason": "accounting_unavailable"}
    assert "implementation execute" in outcome.message  # not labelled "prepare"


def test_another_posix_platform_is_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This host cannot become macOS on demand: the platform name is the injected fault.
    monkeypatch.setattr(workers, "PLATFORM", "darwin")
    outcome = _run(tmp_path, FAULT)
    assert isinstance(outcome, FixedDatasetResult), outcome
    m = outcome.measurements.to_json()
    for name in ("cpu_time_ns", "peak_rss_bytes"):
        assert m[name] == {"status": "unavailable", "reason": "unsupported"}
    assert m["accounting_backend"] == "none"


def _cpu_only_cgroup2(backend: str, label: str) -> object:
    """Real cgroup2 accounting from a layout that offers no memory controller at all."""
    from metewand.measure.accounting import open_accounting

    layout = detect_layout()
    assert layout.v2 is not None
    v2 = layout.v2._replace(controllers=frozenset(layout.v2.controllers) - {"memory"})
    v1 = {name: h for name, h in layout.v1.items() if name != "memory"}
    return open_accounting("cgroup2", label=label, layout=layout._replace(v2=v2, v1=v1))


def _cgroup2_writable() -> bool:
    v2 = detect_layout().v2
    return v2 is not None and v2.own_dir is not None and v2.writable


@pytest.mark.skipif(not _cgroup2_writable(), reason="no writable cgroup2 here")
def test_no_memory_controller_falls_back_to_vm_hwm(tmp_path: Path) -> None:
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    from metewand.suites.compute import api

    outcome = api.run_fixed_dataset_outcome(
        str(dataset),
        [sys.executable, str(FAULT), "impl"],
        [sys.executable, str(FAULT), "eval"],
        private_root=str(tmp_path),
        accounting_opener=_cpu_only_cgroup2,
    )
    assert isinstance(outcome, FixedDatasetResult), outcome
    m = outcome.measurements
    assert m.accounting_backend == "cgroup2" and m.cpu_time_ns.status == "complete"
    assert m.peak_rss_bytes.status == "partial" and m.peak_rss_bytes.reason == "process_only"
    assert m.peak_rss_bytes.value is not None and m.peak_rss_bytes.value > 1 * MiB
    tree = outcome.tree_memory.to_json()["kernel_tree_memory_high_water_bytes"]
    assert tree == {"status": "unavailable", "reason": "unsupported"}


def _no_cgroups_at_all(backend: str, label: str) -> object:
    """Asking for cgroup2 on a layout that has none: the real opener refuses."""
    from metewand.measure.accounting import open_accounting

    layout = detect_layout()._replace(v2=None, v1={})
    return open_accounting("cgroup2", label=label, layout=layout)


def test_accounting_that_cannot_open_is_accounting_unavailable(tmp_path: Path) -> None:
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    outcome = run_fixed_dataset_outcome(
        str(dataset),
        [sys.executable, str(FAULT), "impl"],
        [sys.executable, str(FAULT), "eval"],
        private_root=str(tmp_path),
        accounting_opener=_no_cgroups_at_all,
    )
    assert isinstance(outcome, FixedDatasetResult), outcome
    m = outcome.measurements.to_json()
    for name in ("cpu_time_ns", "peak_rss_bytes"):
        assert m[name] == {"status": "unavailable", "reason": "accounting_unavailable"}
    assert m["accounting_backend"] == "none"


def test_an_implementation_that_never_launched_is_not_started(tmp_path: Path) -> None:
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    outcome = run_fixed_dataset_outcome(
        str(dataset),
        [str(tmp_path / "no-such-program")],
        [sys.executable, str(FAULT), "eval"],
        private_root=str(tmp_path),
    )
    assert isinstance(outcome, FixedDatasetFailure)
    assert outcome.code == "setup_failure"
    m = outcome.measurements.to_json()
    for name in ("cpu_time_ns", "peak_rss_bytes"):
        assert m[name] == {"status": "unavailable", "reason": "not_started"}
    assert m["accounting_backend"] == "none"


@pytest.mark.skipif(not _cgroup_memory_usable(), reason="no cgroup memory controller here")
def test_a_run_row_carries_vm_hwm_and_the_tree_record_beside_it(tmp_path: Path) -> None:
    from compute_helpers import problem, run, write_manifest

    manifest = write_manifest(
        tmp_path,
        problem()
        + f"""
[implementations.scratch]
runner = "python"
entrypoint = "{SCRATCH}"
env = {{ METEWAND_SCRATCH_MB = "150" }}
problems = ["answer"]

[[experiments]]
name = "scratch"
problem = "answer"
implementations = ["scratch"]
""",
    )
    (row,) = run(manifest, tmp_path).rows  # every record validates against its schema
    assert row["status"] == "accepted", row["message"]
    data = row["record"]["provenance"]["data"]
    rss = data["measurements"]["peak_rss_bytes"]
    assert rss["status"] == "partial" and rss["reason"] == "process_only"
    assert row["statistics"]["vm_hwm_bytes"] <= rss["value"] < 100 * MiB
    tree = data["tree_memory"]["kernel_tree_memory_high_water_bytes"]
    assert tree["status"] == "complete" and tree["value"] >= 150 * MiB
    assert row["observation"]["timing"]["peak_rss_bytes"] is None
    assert row["observation"]["provenance"]["data"]["tree_memory"] == data["tree_memory"]
