"""Profiled browser runs on a Dask cluster whose hosts are Linux namespaces (issue #26).

Each host is a network + UTS namespace with its own veth address on a private bridge, its own
host name, its own cgroup subtree and its own CPU (a v1 cpuset: this hybrid machine offers no
cpuset in cgroup2), and one ``dask worker`` started in it through ``ip netns exec``; its
fixture server and engines listen on the namespace's own loopback. The scheduler and the
client (``metewand browser run``) stay in the root namespace. Nothing leaves the machine: the
addresses exist only on the test's bridge. ``netns_hosts`` builds it and removes every
namespace, veth, group and process, also when a test fails.

Scenarios: a profiled run over two hosts (each host's calibration, verdict, cold starts and
fingerprint; a third host whose Lightpanda binary differs refused before any round); the
client killed and resumed; a host torn down mid-round (its round lost with it, run again on
the other host, nothing lost or written twice).

Needs root and namespaces: skipped with the reason where they cannot be made (also under
CI=true, where a machine that can make them runs it and a failure fails).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dask_helpers as helpers
import netns_hosts
from browser_run_helpers import manifest_of
from metewand.runtime.rundir import read_jsonl
from metewand.suites.browser.engines import ResolvedEngine, resolve
from metewand.suites.browser.leftovers import run_processes

pytestmark = [pytest.mark.slow, pytest.mark.engines]

WHY_NOT = netns_hosts.cannot_make_hosts()
TASKS = ("own_ax_tree", "own_eval_values", "own_load_events")
ENGINES = ("chrome", "lightpanda")
PROFILED = (
    "--engines",
    ",".join(ENGINES),
    "--resource-profile",
    "engine",
    "--resource-calibration",
    "interleaved",
    "--no-progress",
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[netns_hosts.NetnsLab]:
    """host-a on CPU 0, host-b on CPU 1, and host-c whose Lightpanda is another binary (a copy
    with one more byte: its sha256 differs from the client's)."""
    if WHY_NOT is not None:
        pytest.skip(f"namespace hosts cannot be made here: {WHY_NOT}")
    odd = tmp_path_factory.mktemp("odd-binary") / "lightpanda"
    real = resolve("lightpanda")
    assert isinstance(real, ResolvedEngine), real
    shutil.copy2(real.binary, odd)
    with open(odd, "ab") as handle:
        handle.write(b"\0")
    lab = netns_hosts.NetnsLab()
    try:
        lab.start_scheduler()
        for name, cpu in (("host-a", 0), ("host-b", 1)):
            lab.start_worker(lab.add_host(name, cpu))
        lab.start_worker(lab.add_host("host-c", 0), {"METEWAND_LIGHTPANDA_BIN": str(odd)})
        helpers.wait_for_workers_at(lab.address, 3, timeout_s=120)
        yield lab
    finally:
        lab.close()


def browser(out: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "metewand", "browser", "run", *args, "--out", str(out)]
    return subprocess.run(
        command,
        env=helpers.dask_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=helpers.REPO,
    )


def selection(tasks: tuple[str, ...] = TASKS) -> list[str]:
    return [arg for task in tasks for arg in ("--task", task)]


def hosts_of(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(row["placement"]["host"] for row in rows)


def all_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every whole row, the unprofiled twins too, by the run store's reading rule: a client
    killed mid-write leaves a torn last line (an 18 KB row cut at a page), which no reader counts
    and a resume cuts off."""
    return read_jsonl(run_dir / "results.jsonl").rows


def engines_on(host: netns_hosts.NsHost) -> list[str]:
    commands = [helpers.command_of(pid) for pid in host.pids()]
    return [c for c in commands if "chromium" in c or "lightpanda" in c]


def wait_until_idle(host: netns_hosts.NsHost, timeout_s: float = 120) -> None:
    """An earlier test's client killed mid-round leaves its round running on the worker until
    the next client closes its slot; a test that watches a host's engines starts once it is
    quiet, or it would see that round's engines and take them for its own."""
    deadline = time.monotonic() + timeout_s
    left = engines_on(host)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = engines_on(host)
    assert not left, f"{host.name} still runs engines: {left}"


def test_a_profiled_run_over_two_hosts_judges_each_on_its_own(
    tmp_path: Path, lab: netns_hosts.NetnsLab
) -> None:
    out = tmp_path / "runs"
    done = browser(
        out,
        *PROFILED,
        *selection(),
        "--k",
        "2",
        "--cold-start-samples",
        "2",
        "--run-id",
        "p",
        "--executor",
        "dask",
        "--scheduler",
        lab.address,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    run_dir = out / "p"
    rows = all_rows(run_dir)
    assert len(rows) == len({r["key"] for r in rows}) == len(TASKS) * 2 * 2 * 2  # twins too
    assert set(hosts_of(rows)) == {"host-a", "host-b"}, hosts_of(rows)
    for cycle in {r["placement"]["try"] for r in rows}:  # a rotation cycle, whole, on one host
        members = [r for r in rows if r["placement"]["try"] == cycle]
        assert len({r["placement"]["host"] for r in members}) == 1
        assert Counter(
            (r["engine"], r["order"]["position"]) for r in members if not r.get("calibration_twin")
        ) == {(e, p): 1 for e in ENGINES for p in (0, 1)}

    # host-c was refused when it registered, before any round, saying why
    record = json.loads((run_dir / "dask_hosts.json").read_text())
    odd = next(w for w in record["workers"] if w["host"] == "host-c")
    assert odd["accepted"] is False and odd["rows"] == 0
    assert "engine lightpanda binary" in odd["reason"] and "not the run's pin" in odd["reason"]
    data = manifest_of(run_dir)["data"]
    prints = data["host_fingerprints"]
    assert prints["host-a"]["cpu_affinity"] == [0] and prints["host-b"]["cpu_affinity"] == [1]
    assert prints["host-a"]["usable_cores"] == prints["host-b"]["usable_cores"] == 1
    assert prints["host-c"]["accepted"] is False and prints["host-c"]["reason"] == odd["reason"]
    for host in ("host-a", "host-b"):  # each host hashed its own binaries: the pinned ones
        for engine in ENGINES:
            sha = data["engines_by_host"][host][engine]["binary_sha256"]
            assert sha == data["engine_pins"][engine]

    # each host's own cold starts, none from host-c
    cold = [json.loads(line) for line in (run_dir / "cold_start.jsonl").read_text().splitlines()]
    assert Counter((c["placement"]["host"], c["engine"]) for c in cold) == {
        (h, e): 2 for h in ("host-a", "host-b") for e in ENGINES
    }

    # per-host calibration and verdicts; three tasks are too few to test homogeneity
    summary = json.loads((run_dir / "resource_summary.json").read_text())
    hosts = summary["hosts"]
    assert hosts["places"] == ["host-a", "host-b"] and hosts["pooled"] is False
    assert "too few shared tasks to test" in hosts["statement"]
    for place, level in hosts["per_host"].items():
        assert level["calibration"]["mode"] == "interleaved", place
        assert level["calibration"]["overall"]["pairs"] >= 1, level["calibration"]
        assert [c["id"] for c in level["eligibility_conditions"]][-1] == "one_host"
        assert level["cold_start"]["by_engine"]["chrome"]["samples"] == 2
        assert level["fingerprint"]["engines"] == {e: [data["engine_pins"][e]] for e in ENGINES}
    assert "resource comparison per host: host-a " in done.stderr
    report = subprocess.run(
        [sys.executable, "-m", "metewand", "report", str(run_dir), "--format", "md,json,html"],
        env=helpers.dask_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr[-2000:]
    card = (run_dir / "resource-card.md").read_text()
    assert "### Per-host verdicts" in card and "### Homogeneity test" in card
    assert "Resource comparison per host" in (run_dir / "report.html").read_text()
    assert run_processes(run_dir, "p") == []


def test_the_client_killed_and_resumed_repeats_and_loses_nothing(
    tmp_path: Path, lab: netns_hosts.NetnsLab
) -> None:
    out = tmp_path / "runs"
    command = [
        sys.executable,
        "-m",
        "metewand",
        "browser",
        "run",
        *PROFILED,
        *selection(TASKS[:2]),
        "--k",
        "3",
        "--cold-start-samples",
        "1",
        "--run-id",
        "r",
        "--out",
        str(out),
        "--executor",
        "dask",
        "--scheduler",
        lab.address,
    ]
    client = subprocess.Popen(
        command,
        env=helpers.dask_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=helpers.REPO,
    )
    results = out / "r" / "results.jsonl"
    try:  # 3 rotation cycles on 2 hosts: once both hosts sent one, the third is in flight
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and client.poll() is None:
            if results.exists() and len(hosts_of(all_rows(out / "r"))) == 2:
                break
            time.sleep(0.05)
        os.killpg(client.pid, signal.SIGKILL)
    finally:
        client.wait()
    before = all_rows(out / "r")
    assert len(hosts_of(before)) == 2 and len(before) < 24, len(before)

    resumed = browser(
        out, "--resume", "r", "--no-progress", "--executor", "dask", "--scheduler", lab.address
    )
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    rows = all_rows(out / "r")
    assert rows[: len(before)] == before
    assert len(rows) == len({r["key"] for r in rows}) == 2 * 2 * 3 * 2
    record = json.loads((out / "r" / "dask_hosts.json").read_text())
    assert record["closed_orphaned_slots"], record  # the killed client's slots, closed
    cold = (out / "r" / "cold_start.jsonl").read_text().splitlines()
    assert len(cold) == 2 * len(ENGINES)  # once per host: the resumed session ran none again
    assert [s["executor"] for s in manifest_of(out / "r")["data"]["executor_sessions"]] == [
        "dask",
        "dask",
    ]
    assert run_processes(out / "r", "r") == []


def test_a_host_torn_down_mid_round_reruns_its_round_on_the_other(
    tmp_path: Path, lab: netns_hosts.NetnsLab
) -> None:
    """The last test: host-b does not come back."""
    doomed = next(h for h in lab.hosts if h.name == "host-b")
    wait_until_idle(doomed)
    out = tmp_path / "runs"
    command = [
        sys.executable,
        "-m",
        "metewand",
        "browser",
        "run",
        *PROFILED,
        *selection(TASKS[:2]),
        "--k",
        "2",
        "--cold-start-samples",
        "0",
        "--run-id",
        "t",
        "--out",
        str(out),
        "--executor",
        "dask",
        "--scheduler",
        lab.address,
    ]
    client = subprocess.Popen(
        command,
        env=helpers.dask_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=helpers.REPO,
    )
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and client.poll() is None and not seen:
            seen = engines_on(doomed)  # an engine of host-b's round is up: the round is in flight
            time.sleep(0.02)
        lab.tear_down(doomed)
        _, stderr = client.communicate(timeout=400)
    finally:
        if client.poll() is None:
            os.killpg(client.pid, signal.SIGKILL)
            client.wait()
    assert client.returncode == 0, stderr[-4000:]
    assert seen, f"host-b never ran an engine of this run; its end:\n{stderr[-4000:]}"
    run_dir = out / "t"
    rows = all_rows(run_dir)
    assert len(rows) == len({r["key"] for r in rows}) == 2 * 2 * 2 * 2  # every key once
    lost = read_jsonl(run_dir / "lost_tries.jsonl").rows
    assert lost, f"no try lost; rows by host {hosts_of(rows)}; its end:\n{stderr[-4000:]}"
    assert lost and {record["host"] for record in lost} == {"host-b"}
    by_key = {r["key"]: r for r in rows}
    for record in lost:  # the whole cycle ran again, on host-a, as another try
        again = [by_key[key]["placement"] for key in record["keys"]]
        assert {where["host"] for where in again} == {"host-a"}
        assert {where["try"] for where in again} == {record["retried_as"]} != {record["try"]}
    hosts = json.loads((run_dir / "dask_hosts.json").read_text())
    gone = next(w for w in hosts["workers"] if w["host"] == "host-b")
    assert "unavailable" in gone["host_summary"]
    assert run_processes(run_dir, "t") == []
