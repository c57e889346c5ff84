"""Driver CPU and duration per attempt, metewand's adapters against the peer's, per driver path
(issue 24, items 3 and 4), measured side by side in one invocation on one engine.

For each installable path, the first ``--per-path`` tasks of its corpus subset run once through
our adapter and once through the peer's (``runner/scripts/adapters/*`` and ``framework_probe.js``
of a checkout you cloned, run from there with the same pinned client libraries as ours via
NODE_PATH / our Python), one process per attempt (``--adapter-mode per-attempt``) for both,
alternating which side goes first per task. Both sides are measured by the same runner: the
adapter's process tree in its own accounting group (driver CPU) and the attempt's wall from
payload to result. Then chrome-devtools-mcp in our long-lived mode against our per-attempt mode
(item 4's target: <= 0.3x driver CPU per attempt). Prints medians, ratios ours/peer and the
statuses' agreement, with the load average it ran under.

    git clone /work/peer/lexbench /tmp/peer-lexbench
    .venv/bin/python benchmarks/driver_cost_vs_peer.py --peer /tmp/peer-lexbench --per-path 5

The scratch checkout gets a node_modules link to drivers/node/node_modules and, for Selenium, a
copy of the machine's chromedriver under build_artifacts/ (its adapter insists on both).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.metadata
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from driver_bench import DEFAULT_CORPUS, Bench, bench, load_task, run_task

from metewand.suites.browser.adapter_server import PerAttemptAdapter, open_adapter
from metewand.suites.browser.adapters import AdapterCommand, AdapterRun
from metewand.suites.browser.driver_registry import (
    DRIVER_PATHS,
    DriverMissing,
    node_dir,
    resolve_driver,
)

PEER_ADAPTERS = {
    "chrome_remote_interface": ("node", "cri_adapter.js"),
    "chrome_devtools_mcp": ("node", "cdt_mcp_adapter.js"),
    "stagehand": ("node", "stagehand_adapter.js"),
    "agent_browser": ("node", "ab_scenario_adapter.js"),
    "pydoll": ("python", "pydoll_adapter.py"),
    "cdp_use": ("python", "cdp_use_adapter.py"),
    "selenium": ("python", "selenium_adapter.py"),
}
FRAMEWORKS = {"playwright": "playwright", "puppeteer": "puppeteer"}


class PeerProbe(PerAttemptAdapter):
    """The peer's framework_probe.js: the same payload, handed over in its environment."""

    def __init__(self, peer: Path, framework: str) -> None:
        super().__init__(AdapterCommand(("node",)), label="peer")
        self.peer, self.framework = peer, framework

    async def run(
        self, payload: Any, deadline_s: float, stderr_path: Path, marks: Any = None
    ) -> AdapterRun:
        env = {
            "FRAMEWORK": self.framework,
            "BROWSER_WS": payload["browser_ws"],
            "CDP_PORT": str(payload["cdp_port"]),
            "EXPECT_PRODUCT": payload["expect_product"],
            "EXPECT_UA": payload["expect_ua"],
            "EXPECT_PRODUCT_LIVE": payload["expect_product_live"],
            "TASK_URL": payload["task_url"],
            "ARTIFACT_DIR": payload["artifact_dir"],
            "FW_STEPS": json.dumps(payload["steps"]),
            "FW_CHECKS": json.dumps(payload["checks"]),
            "FW_TASK_TIMEOUT_MS": str(payload["task_timeout_ms"]),
            "NODE_PATH": str(node_dir() / "node_modules"),
        }
        self.command = AdapterCommand(
            ("node", str(self.peer / "runner/scripts/framework_probe.js")), env=env
        )
        return await super().run(payload, deadline_s, stderr_path, marks)


class PeerSelenium(PerAttemptAdapter):
    """The peer's Selenium adapter wants its binding's pins (its runner adds them): the browser,
    the Selenium client, and a chromedriver under its build_artifacts with its digest. The
    machine's chromedriver is copied there (into the scratch checkout) once."""

    def __init__(self, peer: Path, argv: tuple[str, ...]) -> None:
        super().__init__(AdapterCommand(argv), label="peer")
        folder = peer / "build_artifacts" / "chromedriver"
        folder.mkdir(parents=True, exist_ok=True)
        self.bridge = folder / "chromedriver"
        if not self.bridge.exists():
            shutil.copy2(str(shutil.which("chromedriver")), self.bridge)
        self.sha = hashlib.sha256(self.bridge.read_bytes()).hexdigest()[:12]
        done = subprocess.run(
            [str(self.bridge), "--version"], capture_output=True, text=True, check=True
        )
        self.version = done.stdout.split()[1]

    async def run(
        self, payload: Any, deadline_s: float, stderr_path: Path, marks: Any = None
    ) -> AdapterRun:
        engine = payload["binding"]["browser_id"]
        selenium = importlib.metadata.version("selenium")
        pins = {
            "browser": {"ref_id": f"browser.{engine}", "key": engine},
            "driver": {
                "ref_id": "driver.selenium",
                "key": "selenium",
                "metadata": {"version": selenium, "pip_package": "selenium"},
            },
            "bridges": [
                {
                    "ref_id": "bridge.chromedriver",
                    "key": "chromedriver",
                    "executable": str(self.bridge),
                    "metadata": {
                        "binary_path": "build_artifacts/chromedriver/chromedriver",
                        "version": self.version,
                        "sha256_12": self.sha,
                    },
                }
            ],
        }
        payload = {**payload, "binding": {**payload["binding"], "pins": pins}}
        return await super().run(payload, deadline_s, stderr_path, marks)


def peer_runner(peer: Path, key: str) -> PerAttemptAdapter:
    if key in FRAMEWORKS:
        return PeerProbe(peer, FRAMEWORKS[key])
    language, script = PEER_ADAPTERS[key]
    argv = (
        "node" if language == "node" else sys.executable,
        str(peer / "runner/scripts/adapters" / script),
    )
    if key == "selenium":
        return PeerSelenium(peer, argv)
    modules = node_dir() / "node_modules"
    # the peer's adapters resolve their clients from its root; its agent-browser adapter runs AB_BIN
    native = modules / "agent-browser" / "bin" / "agent-browser-linux-x64"
    env = {"NODE_PATH": str(modules), "AB_BIN": str(native)} if language == "node" else {}
    return PerAttemptAdapter(AdapterCommand(argv, env=env), label="peer")


def cpu_ms(run: AdapterRun) -> float | None:
    value = run.cpu_ns.value if run.cpu_ns is not None else None
    return None if value is None else value / 1e6


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _ratio(ours: float | None, theirs: float | None) -> str:
    return f"{ours / theirs:.2f}" if ours is not None and theirs else "n/a"


async def compare_path(b: Bench, key: str, peer: Path, per_path: int, work: Path) -> dict[str, Any]:
    found = resolve_driver(key)
    if isinstance(found, DriverMissing):
        return {"path": key, "skipped": found.detail}
    subset = DRIVER_PATHS[key].subset_dirs[0]
    ids = sorted(p.stem for p in (b.corpus / "tasks" / subset).glob("*.json"))[:per_path]
    sides = {
        "ours": open_adapter(found.command, "per_attempt", key),
        "peer": peer_runner(peer, key),
    }
    runs: dict[str, list[AdapterRun]] = {"ours": [], "peer": []}
    for n, task_id in enumerate(ids):
        task = load_task(b.corpus, subset, task_id)
        for side in ("ours", "peer") if n % 2 == 0 else ("peer", "ours"):
            runs[side].append(await run_task(sides[side], b, key, task, work / side, n + 1))
    row: dict[str, Any] = {"path": key, "tasks": len(ids)}
    for side, got in runs.items():
        row[f"{side}_cpu_ms"] = _median([cpu_ms(r) for r in got])
        row[f"{side}_wall_ms"] = _median([r.wall_ns / 1e6 for r in got])
        row[f"{side}_status"] = [r.classification().status for r in got]
    row["agree"] = sum(a == p for a, p in zip(row["ours_status"], row["peer_status"], strict=True))
    return row


async def mcp_modes(b: Bench, n: int, work: Path) -> dict[str, Any]:
    found = resolve_driver("chrome_devtools_mcp")
    if isinstance(found, DriverMissing):
        return {"skipped": found.detail}
    subset = DRIVER_PATHS["chrome_devtools_mcp"].subset_dirs[0]
    ids = sorted(p.stem for p in (b.corpus / "tasks" / subset).glob("*.json"))[:n]
    kept = open_adapter(found.command, "long_lived", "mcp", work / "mcp-served.log")
    fresh = open_adapter(found.command, "per_attempt", "mcp")
    got: dict[str, list[AdapterRun]] = {"long_lived": [], "per_attempt": []}
    try:
        for i, task_id in enumerate(ids):
            task = load_task(b.corpus, subset, task_id)
            for mode, runner in (
                (("long_lived", kept), ("per_attempt", fresh))
                if i % 2 == 0
                else (("per_attempt", fresh), ("long_lived", kept))
            ):
                got[mode].append(
                    await run_task(runner, b, "chrome_devtools_mcp", task, work / mode, i + 1)
                )
    finally:
        await kept.close()
    # the long-lived process's first attempt carries its start-up: the median leaves it aside
    return {mode: _median([cpu_ms(r) for r in runs]) for mode, runs in got.items()}


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--peer", type=Path, required=True, help="a checkout of the peer repository"
    )
    parser.add_argument("--per-path", type=int, default=5)
    parser.add_argument("--engine", default="chrome")
    parser.add_argument("--path", action="append", help="only these driver paths (repeatable)")
    parser.add_argument("--tasks", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    linked = args.peer / "node_modules"
    if not linked.exists():  # the peer's adapters resolve their clients from its root
        linked.symlink_to(node_dir() / "node_modules")
    keys = args.path or [k for k, p in DRIVER_PATHS.items() if p.adapter is not None]
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mw-driver-cost-") as tmp:
        async with bench(args.engine, args.tasks, Path(tmp)) as b:
            rows = [await compare_path(b, key, args.peer, args.per_path, Path(tmp)) for key in keys]
            modes = await mcp_modes(b, max(args.per_path, 4), Path(tmp))
    print(
        f"engine {args.engine}; load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
        f"after {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"{'path':<24}{'tasks':>6}{'cpu ours':>10}{'cpu peer':>10}{'ratio':>7}{'wall ours':>11}{'wall peer':>11}{'ratio':>7}{'agree':>7}"
    )
    for r in rows:
        if "skipped" in r:
            print(f"{r['path']:<24} skipped: {r['skipped']}")
            continue
        fmt = lambda v: "n/a" if v is None else f"{v:.0f}"  # noqa: E731
        print(
            f"{r['path']:<24}{r['tasks']:>6}{fmt(r['ours_cpu_ms']):>10}{fmt(r['peer_cpu_ms']):>10}"
            f"{_ratio(r['ours_cpu_ms'], r['peer_cpu_ms']):>7}{fmt(r['ours_wall_ms']):>11}{fmt(r['peer_wall_ms']):>11}"
            f"{_ratio(r['ours_wall_ms'], r['peer_wall_ms']):>7}{r['agree']:>4}/{r['tasks']}"
        )
        if r["agree"] != r["tasks"]:
            print(f"{'':<24}statuses ours {r['ours_status']} peer {r['peer_status']}")
    if "skipped" in modes:
        print(f"chrome-devtools-mcp modes: skipped: {modes['skipped']}")
    else:
        print(
            f"chrome-devtools-mcp driver CPU per attempt: long-lived {modes['long_lived']:.0f} ms, "
            f"per-attempt {modes['per_attempt']:.0f} ms, ratio {_ratio(modes['long_lived'], modes['per_attempt'])} (target <= 0.30)"
        )


if __name__ == "__main__":
    asyncio.run(main())
