"""The fixture server's CPU per request, metewand's against the peer's, side by side (issue 24 item 2).

    .venv/bin/python benchmarks/fixture_server_vs_peer.py --peer /tmp/scratch/peer-lexbench [--rounds 20]

On a browser attempt the fixture server shares the harness's process: every page, script and API
call the engine fetches is harness CPU. This runs each server in a process of its own on the
corpus's fixtures:

- ``ours``: ``metewand.suites.browser.fixtures.FixtureServer`` on the browser suite's event loop,
  traffic accounting on (it always is), one attempt open so requests are attributed as in a run;
- ``peer``: the peer's ``runner.run.FixtureServer`` from a scratch checkout (outside any
  repository) as its default run starts it, with no traffic tracker (its resource profile off);
- ``peer+traffic``: the same with its ``FixtureTrafficTracker`` and one attempt open, as its
  ``--resource-profile`` runs start it.

One real headless Chromium (the engines registry's flags) loads the same pages from each server
in turn, the order rotating every round, and waits for each page's load event and a quiet network.
Each server reports its own process CPU (``CLOCK_PROCESS_CPUTIME_ID``: every thread, those that
ended included) before and after its block; the browser counts the requests each block sent. It
prints per server: requests, CPU per request and per page, and the ratio to ``peer`` (<= 1.00 is
the goal), with the host's load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from metewand.suites.browser import engines
from metewand.suites.browser.engines import ResolvedEngine

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "corpus" / "lexbench" / "fixtures"
# The pages the L1 driver tasks open most (their goto URLs), each once per block.
PAGES = (
    "/l1/core",
    "/v0_4/app",
    "/v0_4/locator",
    "/v0_4/frames",
    "/v0_4/obs",
    "/v0_4/waiting",
    "/v0_4/forms",
    "/v0_3/probe/controls",
    "/v0_4/net",
    "/l1/probe",
    "/v0_4/dialogs",
)
QUIET_S = 0.25  # no request for this long after the load event ends a page
PAGE_LIMIT_S = 15.0

# Each server process: start, print its base URL, then answer every stdin line with its CPU ns.
OURS = """
import sys, time
from pathlib import Path
from metewand.suites.browser.fixtures import FixtureServer, ServerThread
thread = ServerThread(FixtureServer(Path(sys.argv[1]), harness_only_graders=True))
print(thread.start(), flush=True)
thread.server.traffic.begin_attempt("bench-attempt")
for _ in sys.stdin:
    print(time.process_time_ns(), flush=True)
"""
PEER = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from runner.run import FixtureServer
from runner.resources import FixtureTrafficTracker
tracker = FixtureTrafficTracker() if sys.argv[3] == "traffic" else None
server = FixtureServer(fixtures_dir=Path(sys.argv[1]), traffic_tracker=tracker)
print(server.start(), flush=True)
if tracker is not None:
    tracker.begin_attempt("bench-attempt", "bench-session")
for _ in sys.stdin:
    print(time.process_time_ns(), flush=True)
"""


class Server:
    """One fixture server in a child process, asked for its own CPU over a pipe."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),
        )
        assert self.proc.stdout is not None
        self.base = self.proc.stdout.readline().strip()
        if not self.base.startswith("http://"):
            raise SystemExit(f"{name}: the server did not start (exit {self.proc.wait(10)})")
        self.cpu_ns = 0
        self.requests = 0
        self.pages = 0
        self.per_block: list[float] = []

    def cpu(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(10)


def servers(peer: Path) -> list[Server]:
    py = sys.executable
    return [
        Server("ours", [py, "-c", OURS, str(FIXTURES)]),
        Server("peer", [py, "-c", PEER, str(FIXTURES), str(peer), "plain"]),
        Server("peer+traffic", [py, "-c", PEER, str(FIXTURES), str(peer), "traffic"]),
    ]


class Page:
    """A CDP session on one Chromium page: navigate, then wait for load and a quiet network."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                self.replies.pop(data["id"]).set_result(data)
            else:
                self.events.put_nowait(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.replies[self.next_id] = reply
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        return await reply

    async def load(self, url: str, base: str) -> int:
        """Requests to ``base`` while ``url`` loads and settles."""
        while not self.events.empty():
            self.events.get_nowait()
        await self.send("Page.navigate", url=url)
        requests, loaded, deadline = 0, False, time.monotonic() + PAGE_LIMIT_S
        while time.monotonic() < deadline:
            try:
                event = await asyncio.wait_for(self.events.get(), QUIET_S)
            except TimeoutError:
                if loaded:
                    return requests
                continue
            method = event.get("method")
            if method == "Network.requestWillBeSent":
                requests += event["params"]["request"]["url"].startswith(base)
            elif method == "Page.loadEventFired":
                loaded = True
        raise SystemExit(f"{url}: no load event within {PAGE_LIMIT_S:g} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def page_session(session: aiohttp.ClientSession, port: int) -> Page:
    deadline = time.monotonic() + 30
    while True:
        try:
            async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
                targets = await resp.json()
            ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            break
        except (aiohttp.ClientError, StopIteration):
            if time.monotonic() > deadline:
                raise SystemExit("Chromium did not open its DevTools port") from None
            await asyncio.sleep(0.1)
    page = Page(await session.ws_connect(ws_url, max_msg_size=0))
    await page.send("Page.enable")
    await page.send("Network.enable")
    await page.send("Network.setCacheDisabled", cacheDisabled=True)  # every block fetches alike
    return page


async def drive(page: Page, all_servers: list[Server], rounds: int) -> None:
    for server in all_servers:  # a warm-up block each, not counted
        for path in PAGES:
            await page.load(server.base + path, server.base)
    for r in range(rounds):
        order = all_servers[r % len(all_servers) :] + all_servers[: r % len(all_servers)]
        for server in order:
            before, requests = server.cpu(), 0
            for path in PAGES:
                requests += await page.load(server.base + path, server.base)
            spent = server.cpu() - before
            server.cpu_ns += spent
            server.requests += requests
            server.pages += len(PAGES)
            server.per_block.append(spent / max(requests, 1))


async def run(chrome: ResolvedEngine, all_servers: list[Server], rounds: int) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mw-fixture-bench-") as profile:
        tmp = Path(profile) / "engine-tmp"
        tmp.mkdir()
        proc = subprocess.Popen(
            chrome.argv(port, Path(profile) / "ud"),
            env=chrome.environment(tmp_dir=tmp),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            async with aiohttp.ClientSession() as session:
                page = await page_session(session, port)
                await drive(page, all_servers, rounds)
                page.reader.cancel()
                await page.ws.close()
        finally:
            proc.terminate()
            proc.wait(10)


def report(all_servers: list[Server], rounds: int, loads: tuple[float, float]) -> None:
    print(
        f"{rounds} rounds x {len(PAGES)} pages per server; load average {loads[0]:.2f} before, "
        f"{loads[1]:.2f} after"
    )
    peer = next(s for s in all_servers if s.name == "peer")
    peer_per_request = peer.cpu_ns / peer.requests
    print("server | requests | CPU/request us | median block us | CPU/page ms | x peer")
    for s in all_servers:
        per_request = s.cpu_ns / s.requests
        print(
            f"{s.name} | {s.requests} | {per_request / 1e3:.1f} | "
            f"{statistics.median(s.per_block) / 1e3:.1f} | {s.cpu_ns / s.pages / 1e6:.2f} | "
            f"{per_request / peer_per_request:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer", type=Path, required=True, help="a scratch checkout of the peer")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    if not (args.peer / "runner" / "run.py").is_file():
        raise SystemExit(f"{args.peer}: not a checkout of the peer (no runner/run.py)")
    if not FIXTURES.is_dir():
        raise SystemExit(f"{FIXTURES}: the corpus's fixtures are missing")
    chrome = engines.resolve("chrome")
    if not isinstance(chrome, ResolvedEngine):
        raise SystemExit(f"chrome not found: {chrome.detail}")
    load = os.getloadavg()[0]
    all_servers = servers(args.peer.resolve())
    try:
        asyncio.run(run(chrome, all_servers, args.rounds))
    finally:
        for server in all_servers:
            server.stop()
    report(all_servers, args.rounds, (load, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
