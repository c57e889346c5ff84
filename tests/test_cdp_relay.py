"""The served chrome-devtools-mcp adapter's CDP relay (``drivers/node/adapters/cdp_relay.js``)
against a real Lightpanda: a command the adapter sends through it runs on the client's own
connection (Lightpanda holds one browser context per connection, so the client sees the context
the relay's command made), its reply never reaches the client, the client's own traffic passes
as it came, and an engine that stops answering (SIGSTOP: a fault only a signal produces on
demand) fails the relay's command within its limit instead of holding the attempt's end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from driver_helpers import Bench, engine_bench
from metewand.suites.browser.driver_registry import node_dir

pytestmark = pytest.mark.engines

RELAY = Path(__file__).resolve().parents[1] / "drivers" / "node" / "adapters" / "cdp_relay.js"

SCRIPT = """
const WebSocket = require('ws');
const { startRelay } = require(process.env.RELAY);
const out = {};
(async () => {
  const relay = await startRelay(process.env.ENGINE_WS);
  const client = new WebSocket(relay.url, { perMessageDeflate: false });
  const seen = [];
  const waiting = new Map();
  client.on('message', (data) => {
    const m = JSON.parse(data);
    seen.push(m.id);
    if (waiting.has(m.id)) waiting.get(m.id)(m);
  });
  const ask = (id, method) => new Promise((resolve) => {
    waiting.set(id, resolve);
    client.send(JSON.stringify({ id, method, params: {} }));
  });
  await new Promise((resolve) => client.once('open', resolve));
  out.before = (await ask(1, 'Target.getBrowserContexts')).result.browserContextIds;
  out.made = (await relay.call('Target.createBrowserContext')).browserContextId;
  out.after = (await ask(2, 'Target.getBrowserContexts')).result.browserContextIds;
  await relay.call('Target.disposeBrowserContext', { browserContextId: out.made });
  out.disposed = (await ask(3, 'Target.getBrowserContexts')).result.browserContextIds;
  out.client_saw = seen;
  process.kill(Number(process.env.ENGINE_PID), 'SIGSTOP');
  const started = Date.now();
  try {
    await relay.call('Target.getBrowserContexts');
    out.stopped = 'answered';
  } catch (e) {
    out.stopped = e.message;
  }
  out.stopped_ms = Date.now() - started;
  process.kill(Number(process.env.ENGINE_PID), 'SIGCONT');
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.log(JSON.stringify({ error: e.message })); process.exit(1); });
"""


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from engine_bench("lightpanda", tmp_path_factory.mktemp("engine-logs"))


def test_the_relay_commands_on_the_clients_connection_and_gives_up_on_a_stopped_engine(
    bench: Bench,
) -> None:
    node = shutil.which("node")
    modules = node_dir() / "node_modules"
    if node is None or not (modules / "ws").is_dir():
        pytest.fail(f"node and {modules}/ws are installed by make; missing here")
    pid = bench.engine.pid
    assert pid is not None
    env = {
        **os.environ,
        "NODE_PATH": str(modules),
        "RELAY": str(RELAY),
        "ENGINE_WS": bench.endpoint.browser_ws,
        "ENGINE_PID": str(pid),
    }
    try:
        done = subprocess.run(
            [node, "-e", SCRIPT], env=env, capture_output=True, text=True, timeout=60
        )
    finally:
        os.kill(pid, signal.SIGCONT)  # whatever happened, the engine goes on
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["before"] == [] and out["after"] == [out["made"]] and out["disposed"] == []
    assert out["client_saw"] == [1, 2, 3]  # its own replies only, none of the relay's
    assert "no answer from the engine in 5000 ms" in out["stopped"]
    assert 4500 <= out["stopped_ms"] < 15000
    assert bench.engine.is_alive()
