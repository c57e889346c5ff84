"""A profiled Dask run's resource comparison host by host (``compare.resource_hosts``): each
host's own verdict, the pooled one only for hosts that pass the homogeneity test, and what the
summary, the card and report.html say about both.

The rows are the synthetic clean rows of ``fair_runs`` with the placement a Dask worker stamps
(the real two-host runs are ``test_dask_netns_hosts.py``'s): each round's rotation cycle on one
host, as a profiled Dask run places them."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from fair_runs import cold_start_rows, manifest, rows
from metewand.compare import resource_card
from metewand.compare.calibration import calibrate
from metewand.compare.resource_hosts import HostLevels, host_levels
from metewand.compare.resource_summary import summarize
from metewand.runtime.schemas import violations

CLEAN: dict[str, Any] = {"polluted": False, "gate": {"passed": True, "triggered": []}}
POLLUTED: dict[str, Any] = {
    "polluted": True,
    "gate": {"passed": False, "triggered": [{"condition": "foreign_cpu_load"}]},
}
SHA = {"chrome": "1" * 64, "lightpanda": "2" * 64}
TASKS = 12  # enough shared tasks for the homogeneity test's interval (>= 8 at 4 comparisons)


def on_hosts(rs: list[dict[str, Any]], hosts: Sequence[str]) -> list[dict[str, Any]]:
    """Each rotation cycle (two rounds for two engines) whole on one host, hosts in turn."""
    for row in rs:
        host = hosts[row["order"]["round"] // 2 % len(hosts)]
        row["placement"] = {
            "executor": "dask",
            "host": host,
            "worker": f"tcp://{host}:1",
            "worker_name": host,
            "try": f"try-{row['order']['round'] // 2}",
        }
        row["engine_provenance"] = {"binary_sha256": SHA[row["engine"]]}
    return rs


def dask_hosts(summaries: dict[str, dict[str, Any]], cpu: dict[str, str] | None = None) -> dict:
    return {
        "workers": [
            {
                "worker": f"tcp://{h}:1",
                "host": h,
                "accepted": True,
                "host_summary": summary,
                "host_facts": {
                    "cpu_model": (cpu or {}).get(h, "Test CPU"),
                    "cpu_count": 2,
                    "cpu_affinity": [0],
                    "memory_bytes": 2**33,
                    "kernel": "Linux 6.1",
                },
            }
            for h, summary in summaries.items()
        ]
    }


def baseline() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return manifest("run_a", mode="baseline"), rows(n_tasks=TASKS, profiled=False)


def calibrator(man: dict[str, Any]) -> Any:
    base_man, base_rows = baseline()

    def each(place_rows: Sequence[dict[str, Any]], _twins: Any) -> dict[str, Any]:
        keys = {(r["task_id"], r["engine"], r["attempt"]) for r in place_rows}
        mine = [b for b in base_rows if (b["task_id"], b["engine"], b["attempt"]) in keys]
        return calibrate(base_man, mine, man, place_rows)

    return each


def levels(rs: list[dict[str, Any]], hosts_record: dict, man: dict | None = None) -> HostLevels:
    man = man or manifest()
    cold = [
        {**r, "placement": {"host": h}} for h in ("host-a", "host-b") for r in cold_start_rows()
    ]
    found = host_levels(man, rs, [], cold, hosts_record, calibrator(man), 200, 7)
    assert found is not None
    return found


def summary_of(rs: list[dict[str, Any]], found: HostLevels) -> dict[str, Any]:
    man = manifest()
    base_man, base_rows = baseline()
    return summarize(
        man,
        rs,
        CLEAN,
        calibrate(base_man, base_rows, man, rs),
        cold_start_rows(),
        resamples=200,
        hosts=found,
    )


def test_equivalent_hosts_are_pooled_and_each_keeps_its_verdict() -> None:
    rs = on_hosts(rows(n_tasks=TASKS), ("host-a", "host-b"))
    found = levels(rs, dask_hosts({"host-a": CLEAN, "host-b": CLEAN}))
    assert found.pooled and found.homogeneity["homogeneous"], found.homogeneity["reasons"]
    for place, record in found.per_host.items():
        assert record["resource_comparison_eligible"], (place, record["ineligibility_reasons"])
        ids = [c["id"] for c in record["eligibility_conditions"]]
        assert ids[-1] == "one_host" and len(ids) == 8
        assert record["calibration"]["acceptable"]
        assert record["fingerprint"]["engines"] == {e: [SHA[e]] for e in SHA}
        assert record["cold_start"]["by_engine"]["chrome"]["samples"] == 5
    summary = summary_of(rs, found)
    assert violations("metewand_resource_summary-1", summary) == []
    assert summary["resource_comparison_eligible"], summary["ineligibility_reasons"]
    one_host = summary["eligibility_conditions"][-1]
    assert one_host["id"] == "one_host" and one_host["passed"]
    assert "pooled: same engine binaries, CPU model and usable cores" in one_host["reason"]
    assert summary["hosts"]["pooled"] is True


def test_a_polluted_host_fails_its_own_verdict_and_the_pooled_gate() -> None:
    rs = on_hosts(rows(n_tasks=TASKS), ("host-a", "host-b"))
    found = levels(rs, dask_hosts({"host-a": CLEAN, "host-b": POLLUTED}))
    assert found.per_host["host-a"]["resource_comparison_eligible"]
    assert found.per_host["host-b"]["ineligibility_reasons"] == ["host polluted: foreign_cpu_load"]
    summary = summary_of(rs, found)
    failed = {c["id"]: c["reason"] for c in summary["eligibility_conditions"] if not c["passed"]}
    # the client's own telemetry (CLEAN here) is not where the engines ran: every host's gate is
    assert failed == {"host_gate": "host polluted: host-b: foreign_cpu_load"}


def test_a_planted_difference_keeps_hosts_apart_with_both_verdicts_side_by_side() -> None:
    rs = on_hosts(rows(n_tasks=TASKS), ("host-a", "host-b"))
    for row in rs:  # host-b's chrome burns 30% more CPU on every task
        if row["placement"]["host"] == "host-b" and row["engine"] == "chrome":
            cpu = row["resource"]["cpu_total_ms"]
            cpu["value"] = int(cpu["value"] * 1.3)
    found = levels(rs, dask_hosts({"host-a": CLEAN, "host-b": CLEAN}))
    assert not found.pooled
    assert found.homogeneity["medians"]["disagreeing"] == ["chrome cpu_total_ms on host-b"]
    comparison = found.homogeneity["medians"]["comparisons"][0]
    assert comparison["engine"] == "chrome" and comparison["metric"] == "cpu_total_ms"
    assert comparison["ratio_interval"][0] > 1.0 and comparison["agrees"] is False
    assert 1.2 < comparison["median_ratio"] < 1.4  # the planted 1.3
    assert all(r["resource_comparison_eligible"] for r in found.per_host.values())
    summary = summary_of(rs, found)
    assert not summary["resource_comparison_eligible"]
    assert summary["ineligibility_reasons"] == [
        "rows from 2 hosts (host-a, host-b) not pooled (medians differ beyond their intervals: "
        "chrome cpu_total_ms on host-b); judged per host, eligible: host-a, host-b"
    ]
    card = resource_card.render(summary)
    assert "Hosts NOT pooled" in card and "### Per-host verdicts" in card
    assert "| chrome | cpu_total_ms | host-b vs host-a |" in card and "**differs**" in card
    assert "### Cold starts per host" in card and "### Host fingerprints" in card


def test_different_binaries_or_cpus_are_never_pooled() -> None:
    rs = on_hosts(rows(n_tasks=TASKS), ("host-a", "host-b"))
    odd = copy.deepcopy(rs)
    for row in odd:
        if row["placement"]["host"] == "host-b" and row["engine"] == "lightpanda":
            row["engine_provenance"]["binary_sha256"] = "3" * 64
    found = levels(odd, dask_hosts({"host-a": CLEAN, "host-b": CLEAN}))
    assert not found.pooled
    assert found.homogeneity["fingerprints"]["problems"] == [
        "lightpanda binaries differ (host-a 222222222222, host-b 333333333333)"
    ]
    cpus = levels(
        rs,
        dask_hosts(
            {"host-a": CLEAN, "host-b": CLEAN}, {"host-a": "Test CPU", "host-b": "Other CPU"}
        ),
    )
    assert not cpus.pooled
    assert cpus.homogeneity["fingerprints"]["problems"] == [
        "cpu_model differs (host-a Test CPU, host-b Other CPU)"
    ]


def test_too_few_shared_tasks_is_said_and_not_pooled() -> None:
    rs = on_hosts(rows(), ("host-a", "host-b"))  # 6 tasks: fewer than the interval needs
    found = levels(rs, dask_hosts({"host-a": CLEAN, "host-b": CLEAN}))
    assert not found.pooled
    assert found.homogeneity["reasons"][0].startswith("too few shared tasks to test: ")


def test_one_host_rows_pass_one_host_and_a_local_run_has_no_host_level() -> None:
    rs = on_hosts(rows(n_tasks=TASKS), ("host-a",))
    found = levels(rs, dask_hosts({"host-a": CLEAN}))
    assert found.pooled and found.homogeneity["tested"] is False
    assert found.one_host["reason"] == "every row from one host: host-a"
    assert host_levels(manifest(), rows(), [], [], None, None, 200, 7) is None
    local = summarize(manifest(), rows(), CLEAN, None, resamples=200)
    assert "hosts" not in local
    assert [c["id"] for c in local["eligibility_conditions"]][-1] == "calibration"


def test_workers_sharing_a_host_are_places_of_their_own() -> None:
    rs = on_hosts(rows(n_tasks=TASKS), ("vm", "vm"))
    for row in rs:  # two LocalCluster workers of one machine
        name = str(row["order"]["round"] // 2 % 2)
        row["placement"].update(worker_name=name, place=f"vm/{name}")
    record = dask_hosts({"vm": CLEAN})
    worker = record["workers"][0]
    record["workers"] = [{**worker, "place": "vm/0"}, {**worker, "place": "vm/1"}]
    found = levels(rs, record)
    assert list(found.per_host) == ["vm/0", "vm/1"]
    assert found.per_host["vm/0"]["host"] == "vm"
    assert found.pooled, found.homogeneity["reasons"]


def test_every_registered_host_fingerprint_reaches_the_manifest(tmp_path: Any) -> None:
    from metewand.runtime.dask_run import record_fingerprints
    from metewand.runtime.store import RunStore

    def registration(worker: str, host: str, accepted: bool, reason: str | None = None) -> dict:
        return {
            "worker": worker,
            "host": host,
            "worker_name": host,
            "accepted": accepted,
            "reason": reason,
            "host_facts": {
                "cpu_model": "Test CPU",
                "cpu_count": 2,
                "cpu_affinity": (1,),
                "kernel": "Linux 6.1",
            },
            "runner": {"metewand_version": "0.1.0", "source": {"tree_sha256": "c" * 64}},
        }

    with RunStore.create(tmp_path, "fp", {"suite": "browser"}) as store:
        record_fingerprints(
            store,
            [
                registration("tcp://a:1", "host-a", True),
                registration("tcp://c:1", "host-c", False, "odd binary"),
            ],
            "session-1",
        )
        # a later session: host-a's refused second worker does not hide its accepted one
        record_fingerprints(
            store,
            [
                registration("tcp://a:2", "host-a", False, "late"),
                {"worker": "tcp://x:1", "accepted": False},
            ],
            "session-2",
        )
        prints = store.manifest["data"]["host_fingerprints"]
    assert sorted(prints) == ["host-a", "host-c"]
    assert prints["host-a"]["accepted"] and prints["host-a"]["session"] == "session-1"
    assert prints["host-a"]["usable_cores"] == 1 and prints["host-a"]["cpu_affinity"] == [1]
    assert prints["host-c"] == {**prints["host-c"], "accepted": False, "reason": "odd binary"}
