"""measure.kept_counters: the same counters as phases.counters_of over kept descriptors, on the
real cgroup backends (and the /proc fallback), with a real CPU-burning member."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from metewand.measure.accounting import AccountingUnavailable, open_accounting
from metewand.measure.forms import Status
from metewand.measure.kept_counters import KeptCounters
from metewand.measure.phases import counters_of

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"


@pytest.mark.parametrize("backend", ["cgroup2", "cgroup1", "proc"])
def test_kept_counters_read_what_counters_of_reads(backend: str) -> None:
    try:
        group = open_accounting(backend, label="mw-kept")
    except AccountingUnavailable as exc:
        pytest.skip(f"{backend} accounting is not usable here: {exc}")
    child = subprocess.Popen([sys.executable, "-c", BURN], preexec_fn=group.preexec_join())
    try:
        group.attach(child.pid)
        plain, kept = counters_of(group), KeptCounters(group)
        readings = []
        for _ in range(5):  # sandwich each kept reading between two plain ones
            time.sleep(0.05)
            before, mine, after = plain(), kept(), plain()
            readings.append((before, mine, after))
            assert mine.process_count.value == before.process_count.value == 1
            assert mine.memory_current.status == before.memory_current.status
            for field in ("total", "user", "system"):
                low, value, high = (getattr(c.cpu, field).value for c in (before, mine, after))
                assert low is not None and value is not None and high is not None
                assert low <= value <= high, (field, low, value, high)
        first, last = readings[0][1], readings[-1][1]
        assert last.cpu.total.value > first.cpu.total.value  # the member burned meanwhile
        child.wait(timeout=30)
        kept.close()
    finally:
        child.kill()
        child.wait()
        group.close()


def test_a_removed_group_reads_as_unavailable_not_an_error() -> None:
    try:
        group = open_accounting("cgroup2", label="mw-kept-gone")
    except AccountingUnavailable as exc:
        pytest.skip(f"cgroup2 accounting is not usable here: {exc}")
    kept = KeptCounters(group)
    assert kept().cpu.total.status is Status.COMPLETE  # opens the descriptors
    group.close()
    gone = kept()
    assert gone.cpu.total.status is Status.UNAVAILABLE
    assert gone.process_count.status is Status.UNAVAILABLE
    kept.close()
