"""compare.hosts on its own: which rows pool hosts, which telemetry stands for a host.

The end-to-end behaviour (a real two-host Dask run, its report and compare) is in
tests/test_dask_hosts.py; these pin the rules on small inputs."""

from __future__ import annotations

from typing import Any

from metewand.compare import hosts


def _row(host: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {"key": "k", "status": "accepted"}
    if host is not None:
        row["placement"] = {"executor": "dask", "host": host, "worker": "w", "try": "t"}
    return row


def _worker(host: str, passed: bool | None, accepted: bool = True) -> dict[str, Any]:
    summary: dict[str, Any] = (
        {"unavailable": "the worker was refused"}
        if passed is None
        else {"gate": {"passed": passed, "triggered": []}, "sample_count": 3}
    )
    return {"worker": f"tcp://{host}", "host": host, "accepted": accepted, "host_summary": summary}


def test_a_local_run_and_a_one_host_run_pool_nothing() -> None:
    assert hosts.pooling([_row(None), _row(None)]) is None
    assert hosts.pooling([_row("a"), _row("a")]) is None
    assert hosts.per_host_records([_row(None)], None) == []
    assert hosts.hosts_block([_row(None)], None) is None


def test_rows_of_two_hosts_say_so() -> None:
    pooled = hosts.pooling([_row("b"), _row("a"), _row("b"), _row(None)])
    assert pooled == {
        "hosts": 2,
        "rows_by_host": {"a": 1, "b": 2},
        "statement": "pooled over 2 hosts (rows: a 1, b 2)",
    }


def test_a_host_with_a_polluted_worker_is_represented_by_it() -> None:
    record = {"workers": [_worker("a", True), _worker("a", False), _worker("b", None, False)]}
    summaries = hosts.host_summaries(record)
    assert list(summaries) == ["a"]  # b's only worker was refused: no telemetry
    assert summaries["a"]["gate"]["passed"] is False
    per_host = {h["host"]: h for h in hosts.per_host_records([], record)}
    assert per_host["a"]["gate_passed"] is False  # one failed worker fails the host
    assert per_host["b"]["gate_passed"] is None  # nothing accepted there: not known
    assert per_host["b"]["workers"][0]["telemetry"] == {"unavailable": "the worker was refused"}
