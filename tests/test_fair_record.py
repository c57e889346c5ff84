"""The per-attempt metewand_engine_resources/1 record from a real sampler on a real cgroup."""

from __future__ import annotations

import subprocess
import sys
import time

import jsonschema
import pytest

from fair_helpers import validate
from fair_runs import resource
from metewand.measure.accounting import open_accounting
from metewand.measure.forms import Reason, complete, partial, unavailable
from metewand.measure.sampler import Sampler
from metewand.suites.browser.resource_record import (
    cpu_delta,
    engine_resources_record,
    ns_to_ms,
    peak_delta,
    peak_missed,
    peer_resources_record,
)

# waits for "go", holds 300 MiB for ~30 ms, frees it, says "done", then idles until stdin closes
SPIKE = (
    "import sys, time\n"
    "sys.stdin.readline()\n"
    "b = b'x' * (300 << 20)\n"
    "time.sleep(0.03)\n"
    "del b\n"
    "print('done', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_memory_spike_between_samples_is_flagged_by_the_kernel_high_water() -> None:
    accounting = open_accounting("auto", label="fair-spike")
    proc = subprocess.Popen(
        [sys.executable, "-c", SPIKE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        preexec_fn=accounting.preexec_join(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        time.sleep(0.2)
        cpu_before = accounting.cpu()
        sampler = Sampler(accounting, interval_ms=5000, pss_every=1)  # no tick during the spike
        t0 = time.monotonic()
        sampler.start()
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == b"done\n"
        summary = sampler.stop()
        wall_ms = (time.monotonic() - t0) * 1000
        attempt_cpu = cpu_delta(cpu_before, accounting.cpu())
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
        accounting.close()
    record = engine_resources_record(
        summary,
        attempt_cpu,
        backend=accounting.backend,
        duration_ms=wall_ms,
        collection_wall_ms=wall_ms,
        engine="python-spike",
    )
    validate("metewand_engine_resources/1", record)
    # CPU keeps microsecond precision (3 decimals of ms), not whole milliseconds
    cpu_ms = record["cpu_total_ms"]["value"]
    assert cpu_ms == round(attempt_cpu.total.value / 1e6, 3)
    peer = peer_resources_record(record)  # the peer's layout: plain numbers + unavailable map
    validate("abb_engine_resources/1", peer)
    assert (
        peer["cpu_total_ms"] == cpu_ms
        and peer["pss_peak_bytes"] == record["pss_peak_bytes"]["value"]
    )
    assert peer["control_plane_traffic"]["available"] is False
    assert "not implemented" in peer["wire_traffic"]["reason"]
    if record["cgroup_memory_peak_bytes"]["status"] == "unavailable":
        pytest.skip("no cgroup memory accounting on this host")
    assert record["cgroup_memory_peak_bytes"]["value"] > 300 << 20
    assert record["pss_peak_bytes"]["value"] < 100 << 20  # the samples never saw the spike
    assert "peak_missed_by_sampler" in record["quality_flags"]
    assert record["cpu_total_ms"]["status"] in ("complete", "partial")
    assert record["cpu_total_ms"]["value"] >= 10  # writing 300 MiB costs CPU
    assert record["avg_cores"] is not None and record["avg_cores"] > 0


def test_record_forms_conversion_and_rejection() -> None:
    assert ns_to_ms(complete(1_499_999)).value == 1
    assert ns_to_ms(complete(1_500_000)).value == 2
    gone = unavailable(Reason.PERMISSION_DENIED)
    assert ns_to_ms(gone) is gone
    assert peak_delta(complete(100), complete(80)).value == 0
    delta = peak_delta(complete(100), partial(150, Reason.INTERRUPTED))
    assert delta.value == 50 and delta.reason is Reason.INTERRUPTED
    assert peak_delta(gone, complete(5)) is gone
    # a kernel peak within 10% / 8 MiB of what the sampler read is not a miss
    samples = [{"memory_current_bytes": {"status": "complete", "value": 200 << 20}}]
    assert not peak_missed(complete(210 << 20), samples)
    assert peak_missed(complete(300 << 20), samples)
    assert not peak_missed(gone, samples)


def test_schema_rejects_zero_for_unmeasured_and_unknown_keys() -> None:
    good = resource(100, 10 << 20, 200.0, 210.0)
    validate("metewand_engine_resources/1", good)
    bad = dict(good, cpu_total_ms=0)  # a bare number where a measurement form belongs
    with pytest.raises(jsonschema.ValidationError):
        validate("metewand_engine_resources/1", bad)
    with pytest.raises(jsonschema.ValidationError):
        validate("metewand_engine_resources/1", dict(good, surprise=1))
    unmeasured = dict(good, pss_peak_bytes={"status": "unavailable", "value": 0})
    with pytest.raises(jsonschema.ValidationError):
        validate("metewand_engine_resources/1", unmeasured)
