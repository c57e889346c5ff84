"""Host telemetry on the real /proc, and the pollution gate tripped by real hogs."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fair_helpers import validate
from metewand import canonical
from metewand.measure.host import (
    HostTelemetry,
    Spool,
    descendant_pids,
    parse_psi,
    read_meminfo,
    take_sample,
)
from metewand.measure.host_gate import GateThresholds, evaluate_gate

CPU_HOG = "import time\nend = time.time() + 20\nwhile time.time() < end: pass\n"
# bytes multiplication writes every page, so the memory is really committed
MEMORY_HOG = (
    "import sys, time\nb = b'x' * (int(sys.argv[1]) << 20)\n"
    "print('ready', flush=True)\ntime.sleep(20)\n"
)


def _spawn(code: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(timeout=10)


def test_real_sample_shape_and_descendants(tmp_path: Path) -> None:
    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    try:
        sample = take_sample(os.getpid(), 0, None)
        assert {p.pid for p in sleepers} <= set(descendant_pids(os.getpid()))
    finally:
        _stop(sleepers)
    validate("abb_host_telemetry/1", sample)
    assert sample["bench_descendant_process_count"] >= 3
    assert sample["memory"]["total_bytes"] > sample["memory"]["available_bytes"] > 0
    assert sample["swap_activity"] is None  # first sample: no previous to difference against
    if Path("/proc/pressure/cpu").exists():
        assert sample["psi"]["cpu"]["some"]["avg10"] >= 0
        assert "psi.cpu" not in sample["unavailable"]


def test_telemetry_thread_writes_jsonl_and_summary(tmp_path: Path) -> None:
    path = tmp_path / "host_telemetry.jsonl"
    telemetry = HostTelemetry(0.1, os.getpid(), path).start()
    time.sleep(0.6)
    summary = telemetry.stop()
    lines = path.read_bytes().splitlines()
    assert len(lines) == summary["sample_count"] >= 3
    for raw in lines:
        sample = canonical.loads(raw)
        validate("abb_host_telemetry/1", sample)
        assert canonical.dumps(sample) == raw  # canonical bytes on disk
    assert [canonical.loads(x)["seq"] for x in lines] == list(range(len(lines)))
    validate("abb_host_summary/1", summary)
    assert summary["sampler_cpu_ms"] > 0
    assert summary["gate"]["thresholds"]["sustained_samples"] == 3
    # these do not depend on what the other tenants of the machine are doing right now
    flags = set(summary["flags"])
    assert not flags & {"abnormal_process_growth", "host_telemetry_missing", "swap_activity"}


def test_callback_sink_receives_every_sample() -> None:
    received: list[dict] = []
    with HostTelemetry(0.1, os.getpid(), received.append) as telemetry:
        time.sleep(0.25)
    assert len(received) == len(telemetry.samples) >= 3


@pytest.mark.slow
def test_cpu_and_memory_hogs_trip_the_gate(tmp_path: Path) -> None:
    meminfo = read_meminfo()
    ratio_before = meminfo["available_bytes"] / meminfo["total_bytes"]
    hog_mib = 3072
    thresholds = GateThresholds(
        cpu_some_avg10_max=5.0,  # 3 busy loops on 2 cores keep someone waiting all the time
        sustained_samples=2,
        # the 3 GiB hog lowers the ratio by ~0.12 on this 24 GiB machine; 0.05 is under half
        min_available_ratio=ratio_before - 0.05,
        process_growth_min=2,
    )
    telemetry = HostTelemetry(0.5, os.getpid(), tmp_path / "h.jsonl", thresholds).start()
    hogs = [_spawn(MEMORY_HOG, str(hog_mib))]
    try:
        assert hogs[0].stdout is not None and hogs[0].stdout.readline() == b"ready\n"
        hogs += [_spawn(CPU_HOG) for _ in range(3)]
        time.sleep(4.0)
        summary = telemetry.stop()  # the hogs are still alive at the last sample
    finally:
        _stop(hogs)
    validate("abb_host_summary/1", summary)
    assert summary["polluted"] is True
    triggered = {t["condition"]: t for t in summary["gate"]["triggered"]}
    assert "low_memory_available" in triggered, summary["gate"]
    assert "abnormal_process_growth" in triggered, summary["gate"]
    assert triggered["abnormal_process_growth"]["figures"]["last"] >= 4
    if Path("/proc/pressure/cpu").exists():
        assert "sustained_cpu_pressure" in triggered, summary["gate"]
    assert summary["max_bench_descendant_process_count"] >= 4


def _fake_sample(seq: int, cpu_some: float, available: int, pswpout: int, procs: int) -> dict:
    line = {"avg10": cpu_some, "avg60": 0.0, "avg300": 0.0, "total": 0}
    zero = {"avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total": 0}
    return {
        "seq": seq,
        "memory": {"total_bytes": 100, "available_bytes": available},
        "vmstat": {"pswpin_pages": 0, "pswpout_pages": pswpout},
        "psi": {"cpu": {"some": line}, "memory": {"some": zero, "full": zero}, "io": None},
        "unavailable": {"psi.io": {"reason": "unsupported", "detail": "fault injected"}},
        "bench_descendant_process_count": procs,
    }


def test_gate_sustained_means_consecutive() -> None:
    th = GateThresholds(cpu_some_avg10_max=50.0, sustained_samples=3)
    spiky = [_fake_sample(i, v, 50, 0, 1) for i, v in enumerate([60, 10, 60, 60, 10, 60])]
    verdict = evaluate_gate(spiky, th)
    assert verdict["passed"], verdict
    sustained = [_fake_sample(i, v, 50, 0, 1) for i, v in enumerate([10, 60, 60, 60, 10])]
    verdict = evaluate_gate(sustained, th)
    assert [t["condition"] for t in verdict["triggered"]] == ["sustained_cpu_pressure"]
    assert verdict["triggered"][0]["figures"]["longest_run_samples"] == 3
    # io PSI absent: listed as unevaluated with the reason, not silently passed
    assert verdict["unevaluated"][0]["condition"] == "sustained_io_pressure"
    assert "fault injected" in verdict["unevaluated"][0]["reason"]


def test_gate_swap_memory_growth_and_missing() -> None:
    samples = [_fake_sample(0, 0, 50, 10, 2), _fake_sample(1, 0, 4, 12, 20)]
    names = {t["condition"] for t in evaluate_gate(samples)["triggered"]}
    assert names == {"swap_activity", "low_memory_available", "abnormal_process_growth"}
    assert evaluate_gate([])["triggered"][0]["condition"] == "host_telemetry_missing"
    failed = evaluate_gate(samples[:1], sampler_errors=["OSError: boom"])
    assert not failed["passed"]
    assert failed["triggered"][0]["condition"] == "host_telemetry_sampler_failed"


def test_psi_absent_is_unavailable_with_reason(tmp_path: Path) -> None:
    # a /proc without pressure files (kernels built without PSI): fault injection by directory
    for name in ("loadavg", "meminfo", "vmstat"):
        (tmp_path / name).write_bytes(Path("/proc", name).read_bytes())
    sample = take_sample(os.getpid(), 0, None, proc=tmp_path)
    assert sample["psi"] == {"cpu": None, "memory": None, "io": None}
    assert sample["unavailable"]["psi.cpu"]["reason"] == "unsupported"
    assert sample["loadavg"] is not None
    validate("abb_host_telemetry/1", sample)


def test_parse_psi_cpu_without_full_line() -> None:
    parsed = parse_psi("some avg10=1.50 avg60=0.20 avg300=0.00 total=1234\n")
    assert parsed == {"some": {"avg10": 1.5, "avg60": 0.2, "avg300": 0.0, "total": 1234}}


def test_a_telemetry_with_a_file_keeps_no_samples_and_reads_back_only_its_own(
    tmp_path: Path,
) -> None:
    """Samples are ~7.5 KB each, one every 2 s for a whole run: with a file they live there
    only, and the summary reads back this telemetry's lines, not a resumed run's earlier ones."""
    path = tmp_path / "host_telemetry.jsonl"
    earlier = b'{"seq":0,"an":"earlier session"}\n'
    path.write_bytes(earlier)
    telemetry = HostTelemetry(0.1, os.getpid(), path).start()
    time.sleep(0.45)
    summary = telemetry.stop()  # the thread joined: no sample is half made while we look
    gc.collect()
    schema = "abb_host_telemetry/1"
    alive = [o for o in gc.get_objects() if isinstance(o, dict) and o.get("schema") == schema]
    assert len(alive) == 1  # the last sample, which a next one's deltas would need
    ours = path.read_bytes()[len(earlier) :].splitlines()
    assert summary["sample_count"] == len(ours) >= 4
    assert telemetry.samples == [canonical.loads(line) for line in ours]
    assert [s["seq"] for s in telemetry.samples] == list(range(len(ours)))


def test_a_spooled_telemetry_keeps_no_samples_and_leaves_no_file() -> None:
    """A Dask worker's telemetry has no run file: its samples go to an anonymous temporary file
    of its own (unlinked at once), and the summary reads them back from it."""
    telemetry = HostTelemetry(0.1, os.getpid(), Spool()).start()
    spool = telemetry._file
    assert os.fstat(spool.fileno()).st_nlink == 0  # nothing on disk to leave behind
    time.sleep(0.45)
    live = telemetry.samples  # read back while the thread still appends
    assert [s["seq"] for s in live] == list(range(len(live))) and len(live) >= 2
    summary = telemetry.stop()
    del live
    gc.collect()
    schema = "abb_host_telemetry/1"
    alive = [o for o in gc.get_objects() if isinstance(o, dict) and o.get("schema") == schema]
    assert len(alive) == 1  # the last sample, which a next one's deltas would need
    assert summary["sample_count"] >= 4
    assert spool.closed
