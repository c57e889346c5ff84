"""Rows of several Dask hosts (issue #14 step 2): paired work on one host, never pooled silently,
a per-host section in the report, per-host activity in the progress.

The cluster is real: a ``dask scheduler`` and three ``dask worker`` processes on loopback, started
as docs/dask.md tells an operator. Two of them stand for two hosts by ``METEWAND_WORKER_HOST``
(host-a, host-b): they are processes of this machine, so their telemetry sees the same machine,
but every row, registration and report reads the host name exactly as it would from two
machines. The third (host-c) offers no ``metewand-host`` resource and is refused with the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import dask_helpers as helpers
from metewand.runtime.host_name import HOST_ENV
from metewand.suites.browser import engines
from metewand.suites.browser.cdp import CdpClient

pytestmark = pytest.mark.slow

MANIFEST = helpers.REPO / "examples" / "sorting" / "metewand.toml"  # replaced below


@pytest.fixture(scope="module", autouse=True)
def _short_example(short_sorting: Path) -> None:
    """Every run here takes the example with 2 repetitions (30 attempts), not its shipped 10."""
    global MANIFEST
    MANIFEST = short_sorting


METEWAND = [sys.executable, "-m", "metewand"]
SCHEMAS = helpers.REPO / "src" / "metewand" / "schemas"
CHROME = engines.resolve("chrome")


def _metewand(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*METEWAND, *args],
        env=helpers.dask_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _start_worker(port: int, name: str, host: str, resource: bool) -> subprocess.Popen[bytes]:
    saved = os.environ.get(HOST_ENV)
    os.environ[HOST_ENV] = host  # dask_env copies os.environ for the worker
    try:
        return helpers.start_worker(port, name, host_resource=resource)
    finally:
        if saved is None:
            del os.environ[HOST_ENV]
        else:
            os.environ[HOST_ENV] = saved


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A two-host Dask run of the sorting example (plain progress on stderr) and a local run."""
    tmp = tmp_path_factory.mktemp("hosts")
    out, cache = tmp / "runs", tmp / "cache"
    port = helpers.free_port()
    started = [helpers.start_scheduler(port)]
    try:
        started += [
            _start_worker(port, "a", "host-a", True),
            _start_worker(port, "b", "host-b", True),
            _start_worker(port, "c", "host-c", False),
        ]
        helpers.wait_for_workers(port, 3)
        dask = _metewand(
            "run",
            str(MANIFEST),
            "--executor",
            "dask",
            "--scheduler",
            f"tcp://127.0.0.1:{port}",
            "--run-id",
            "two",
            "--out",
            str(out),
            "--cache-dir",
            str(cache),
        )
    finally:
        for process in started:
            helpers.stop(process)
    assert dask.returncode == 0, dask.stderr[-3000:]
    local = _metewand(
        "run",
        str(MANIFEST),
        "--run-id",
        "local",
        "--out",
        str(out),
        "--cache-dir",
        str(cache),
        "--no-progress",
    )
    assert local.returncode == 0, local.stderr[-3000:]
    for run_id in ("two", "local"):
        done = _metewand("report", str(out / run_id), "--format", "md,json,html")
        assert done.returncode == 0, done.stderr[-2000:]
    yield {"out": out, "dask": dask, "two": out / "two", "local": out / "local", "tmp": tmp}


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def _scores(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "scores.json").read_text())


def test_every_row_names_its_host_and_paired_work_stays_on_one_host(runs: dict) -> None:
    rows = _rows(runs["two"])
    assert len(rows) == 30 and {r["status"] for r in rows} == {"accepted"}
    assert {r["placement"]["host"] for r in rows} == {"host-a", "host-b"}  # c was refused
    # one case's implementations for one repetition: one host, one worker, one try (one unit)
    pairs: dict[tuple[str, str, str], set[tuple[str, str, str]]] = defaultdict(set)
    impls: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for row in rows:
        experiment, _case, dataset, impl, rep = row["key"].split("/")
        where = row["placement"]
        pairs[(experiment, dataset, rep)].add((where["host"], where["worker"], where["try"]))
        impls[(experiment, dataset, rep)].add(impl.split("@")[0])
    assert len(pairs) == 10
    assert all(len(placed) == 1 for placed in pairs.values()), pairs
    assert all(len(names) == 3 for names in impls.values())


def test_progress_counts_finished_attempts_per_host(runs: dict) -> None:
    # off a terminal the progress is plain lines; the last one counts every attempt per host
    lines = [line for line in runs["dask"].stderr.splitlines() if line.startswith("[30/30]")]
    assert lines, runs["dask"].stderr[-2000:]
    rows = _rows(runs["two"])
    counts = {h: sum(r["placement"]["host"] == h for r in rows) for h in ("host-a", "host-b")}
    assert f"per host: host-a={counts['host-a']} host-b={counts['host-b']}" in lines[-1]


def test_scores_say_which_medians_pool_two_hosts(runs: dict) -> None:
    scores = _scores(runs["two"])
    pooled = scores["hosts"]["pooled"]
    rows = _rows(runs["two"])
    by_host = {h: sum(r["placement"]["host"] == h for r in rows) for h in ("host-a", "host-b")}
    assert pooled == {
        "hosts": 2,
        "rows_by_host": by_host,
        "statement": f"pooled over 2 hosts (rows: host-a {by_host['host-a']}, "
        f"host-b {by_host['host-b']})",
    }
    schema = json.loads((SCHEMAS / "metewand_compute_cases-1.schema.json").read_text())
    jsonschema.validate(scores["cases"], schema)
    for case in scores["cases"]["cases"]:
        case_hosts = {
            r["placement"]["host"]
            for r in rows
            if r["experiment"] == case["coordinates"]["experiment"]
            and r["dataset_parameters"] == case["coordinates"]["dataset_parameters"]
            and r["dataset"] == case["coordinates"]["dataset"]
        }
        # a case says it is pooled exactly when its rows ran on both hosts
        assert ("pooled_over_hosts" in case) == (len(case_hosts) == 2), case["case"]
        for ratio in case.get("ratios", {}).values():
            assert ratio["paired"] is True  # repetitions pair on one host's rows
    card = (runs["two"] / "scorecard.md").read_text()
    assert (
        f"**warning:** rows from 2 hosts: medians over all rows are {pooled['statement']}" in card
    )
    spanning = [c for c in scores["cases"]["cases"] if "pooled_over_hosts" in c]
    for case in spanning:
        assert f"- {case['case']}: {case['pooled_over_hosts']['statement']}" in card


def test_per_host_section_counts_refusals_and_telemetry(runs: dict) -> None:
    block = _scores(runs["two"])["hosts"]
    per_host = {h["host"]: h for h in block["per_host"]}
    assert list(per_host) == ["host-a", "host-b", "host-c"]
    rows = _rows(runs["two"])
    for host in ("host-a", "host-b"):
        mine = [r for r in rows if r["placement"]["host"] == host]
        entry = per_host[host]
        assert entry["attempts"] == len(mine) and entry["by_status"] == {"accepted": len(mine)}
        assert entry["units"] == len({r["placement"]["try"] for r in mine}) == len(mine) // 3
        assert entry["lost_tries"] == 0
        (worker,) = entry["workers"]
        assert worker["accepted"] and worker["rows"] == len(mine)
        telemetry = worker["telemetry"]
        assert telemetry["sample_count"] >= 1 and telemetry["gate_passed"] in (True, False)
        assert entry["gate_passed"] is telemetry["gate_passed"]
    refused = per_host["host-c"]
    assert refused["attempts"] == 0 and refused["units"] == 0
    (worker,) = refused["workers"]
    assert not worker["accepted"] and "offers no metewand-host resource" in worker["reason"]
    assert worker["telemetry"] == {"unavailable": "the worker was refused"}
    card = (runs["two"] / "scorecard.md").read_text()
    assert "## Per host (Dask)" in card
    assert "| host-c | 0 | 0 | none | 0 | 0 accepted, 1 refused | unavailable |" in card
    assert "refused: the worker offers no metewand-host resource" in card


def test_compare_names_the_host_difference_and_the_pooled_medians(runs: dict) -> None:
    out = runs["tmp"] / "cmp"
    done = _metewand(
        "compare", str(runs["local"]), str(runs["two"]), "--format", "json", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "compare.json").read_text())
    schema = json.loads((SCHEMAS / "metewand_compare-2.schema.json").read_text())
    jsonschema.validate(result, schema)
    differences = {d["fact"]: d for d in result["provenance_differences"]}
    assert differences["row_hosts"] == {"fact": "row_hosts", "base": None, "new": "host-a,host-b"}
    assert any(w.startswith("NEW's medians are pooled over 2 hosts") for w in result["warnings"])
    pooled = [g for g in result["groups"] if "pooled_over_hosts" in g]
    assert pooled and all(g["pooled_over_hosts"]["base"] is None for g in pooled)
    assert "row_hosts: BASE None / NEW host-a,host-b" in done.stdout


def test_a_local_run_has_no_host_section(runs: dict) -> None:
    scores = _scores(runs["local"])
    assert "hosts" not in scores
    assert not any("pooled_over_hosts" in c for c in scores["cases"]["cases"])
    assert "Per host" not in (runs["local"] / "scorecard.md").read_text()
    assert 'id="hosts"' not in (runs["local"] / "report.html").read_text()


@pytest.mark.engines
@pytest.mark.skipif(not isinstance(CHROME, engines.ResolvedEngine), reason="needs chromium")
def test_the_per_host_section_renders_in_headless_chromium(runs: dict, tmp_path: Path) -> None:
    html = runs["two"] / "report.html"
    seen = asyncio.run(_open(html.as_uri(), tmp_path / "profile"))
    assert seen["scripts"] == 0
    errors = [e for e in seen["events"] if e["method"] in ("Runtime.exceptionThrown",)]
    assert errors == []
    requested = {
        e["params"]["request"]["url"]
        for e in seen["events"]
        if e["method"] == "Network.requestWillBeSent"
    }
    # self-contained: nothing fetched but the page and its inline images
    assert {u for u in requested if not u.startswith("data:")} == {html.as_uri()}
    text = seen["hosts_text"]
    assert text.startswith("Per host (Dask)")
    assert "pooled over 2 hosts" in text
    for fragment in ("host-a", "host-b", "host-c", "refused: the worker offers no metewand-host"):
        assert fragment in text
    assert seen["hosts_height"] > 100  # laid out, not hidden
    assert "warning: rows from 2 hosts" in seen["body_text"]


async def _open(url: str, user_data: Path) -> dict[str, Any]:
    assert isinstance(CHROME, engines.ResolvedEngine)
    tmp = Path(tempfile.mkdtemp(prefix="mw-hosts-"))  # short: Chromium's socket path must fit
    proc = subprocess.Popen(
        [*CHROME.argv(0, user_data), "--window-size=1200,900"],
        env=CHROME.environment(tmp_dir=tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = user_data / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
            assert time.monotonic() < deadline, "chromium did not start"
            await asyncio.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        client = await CdpClient.connect(f"ws://127.0.0.1:{port}{path}")
        try:
            return await _capture(client, url)
        finally:
            await client.close()
    finally:
        proc.kill()
        proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


async def _capture(client: CdpClient, url: str) -> dict[str, Any]:
    target = await client.send("Target.createTarget", {"url": "about:blank"})
    attached = await client.send(
        "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
    )
    sid = attached["sessionId"]
    for domain in ("Page", "Runtime", "Network"):
        await client.send(f"{domain}.enable", session_id=sid)
    await client.send("Page.navigate", {"url": url}, session_id=sid)
    await client.wait_for_event("Page.loadEventFired", session_id=sid, timeout=30)

    async def evaluate(expr: str) -> Any:
        reply = await client.send(
            "Runtime.evaluate", {"expression": expr, "returnByValue": True}, session_id=sid
        )
        return reply["result"].get("value")

    return {
        "events": client.events(sid),
        "scripts": await evaluate("document.scripts.length"),
        "body_text": await evaluate("document.body.innerText"),
        "hosts_text": await evaluate("document.getElementById('hosts').innerText"),
        "hosts_height": await evaluate(
            "document.getElementById('hosts').getBoundingClientRect().height"
        ),
    }
