"""What every Python adapter shares: read the abb_scenario_adapter/1 payload, the binding gate,
the op loop, check grading, and printing exactly one result. Standalone on purpose (no metewand
import): an adapter is a separate program speaking only the contract.

A driver supplies ``connect(payload, budget) -> session``, ``live_product(session)``,
``close(session)`` and ``ops``: {op name: async fn(session, step, state) -> value}.

Driver-op marks (metewand's addition, beside the contract): a payload carrying
``metewand_mark_fd`` names an inherited pipe; one line is written to it at each boundary
(``driver_connect``, ``op<i>:<op>`` before each op, ``driver_close`` after the last). Where the
payload also names files (``metewand_mark_reads``: the engine's accounting group), each line
carries their bytes, read here at the boundary, then the monotonic clock (``|`` for a newline,
``!<errno name>`` for a failed read): the harness reads the pipe once after the result instead of
waking at each op. Else the harness reads the counters as each line arrives. Without the key
nothing is written.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

RESERVE_S = 0.5  # kept back from the task budget so the result is always printed
FALSY_TEXT = {"", "false", "undefined", "null", "0"}


async def close_targets(
    browser_send: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
    target_ids: list[str],
) -> None:
    """Close these pages with Target.closeTarget, which runs no beforeunload handler (a page
    with one could refuse Page.close). The engine finishes the close after its answer."""
    for target in target_ids:
        try:
            await browser_send("Target.closeTarget", {"targetId": target})
        except Exception as exc:  # noqa: BLE001 - the rest are still closed
            print(f"close page: {exc}", file=sys.stderr)


class Budget:
    def __init__(self, payload: dict[str, Any]) -> None:
        self.end = time.monotonic() + payload.get("task_timeout_ms", 30000) / 1000 - RESERVE_S
        self.action_s = payload.get("action_timeout_ms", 8000) / 1000

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def wait(self, ms: float | None = None) -> float:
        """One op's wait in seconds: its own limit, never past the attempt's budget."""
        own = ms / 1000 if ms else self.action_s
        return max(0.001, min(own, self.remaining()))


class OpMarks:
    """The harness's mark channel for this payload, or nothing when it asked for no marks."""

    def __init__(self, payload: dict[str, Any]) -> None:
        fd = payload.get("metewand_mark_fd")
        self.fd = fd if self.wanted(payload) else None
        plan = payload.get("metewand_mark_reads")
        self.reads = MarkReads(plan) if self.fd is not None and isinstance(plan, list) else None

    @staticmethod
    def wanted(payload: dict[str, Any]) -> bool:
        fd = payload.get("metewand_mark_fd")
        return isinstance(fd, int) and not isinstance(fd, bool) and fd > 2

    def __call__(self, name: str) -> None:
        if self.fd is None:
            return
        # the harness takes plain names only: any other character becomes "_"
        plain = re.sub(r"[^A-Za-z0-9_.:\-]", "_", name)[:120].encode("ascii")
        if self.reads is not None:
            plain += b"\t" + self.reads.read()
        try:  # one write per line (atomic on a pipe); a full pipe drops the mark, never blocks
            os.write(self.fd, plain + b"\n")
        except OSError:
            pass

    def close(self) -> None:
        if self.reads is not None:
            self.reads.close()


class MarkReads:
    """The files a mark reads, opened once for the attempt (a pread each at the mark)."""

    def __init__(self, plan: list[Any]) -> None:
        self.files: list[tuple[int | None, int, bytes | None, str]] = []
        for entry in plan:
            entry = entry if isinstance(entry, dict) else {}
            restart = entry.get("restart")
            restart_bytes = restart.encode() if isinstance(restart, str) else None
            size = entry.get("size")
            size = min(size if isinstance(size, int) and size > 0 else 4096, 1 << 20)
            self.files.append(self._open(entry, restart_bytes, size))

    @staticmethod
    def _open(
        entry: dict[str, Any], restart: bytes | None, size: int
    ) -> tuple[int | None, int, bytes | None, str]:
        flags = (os.O_RDWR if restart else os.O_RDONLY) | os.O_CLOEXEC
        try:
            fd = os.open(str(entry.get("path")), flags)
        except OSError as exc:
            return None, size, restart, _code(exc)
        try:  # a high-water kept per descriptor starts its first window now
            if restart and entry.get("restart_at_open"):
                os.pwrite(fd, restart, 0)
        except OSError as exc:
            os.close(fd)
            return None, size, restart, _code(exc)
        return fd, size, restart, ""

    def read(self) -> bytes:
        fields = []
        for fd, size, restart, error in self.files:
            if fd is None:
                fields.append(b"!" + error.encode())
                continue
            try:
                raw = os.pread(fd, size, 0)
                if restart:
                    os.pwrite(fd, restart, 0)  # the next window starts now
            except OSError as exc:
                fields.append(b"!" + _code(exc).encode())
            else:
                fields.append(raw.replace(b"\n", b"|"))
        return b"%d\t" % time.monotonic_ns() + b"\t".join(fields)

    def close(self) -> None:
        for fd, *_rest in self.files:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.files = []


def _code(exc: OSError) -> str:
    """An error's name as the harness reads it back (``ENOENT``)."""
    return errno.errorcode.get(exc.errno or 0, "EIO")


@dataclass
class State:
    payload: dict[str, Any]
    budget: Budget
    saved: dict[str, str] = field(default_factory=dict)
    mark: OpMarks | None = None


Op = Callable[[Any, dict[str, Any], State], Awaitable[Any]]


def stringify(value: Any) -> str:
    """Saved values read like the Node adapters' (JSON.stringify, 'undefined' for none)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def substitute(value: Any, tokens: dict[str, str]) -> Any:
    if isinstance(value, str):
        for token, text in tokens.items():
            value = value.replace(token, text)
        return value
    if isinstance(value, list):
        return [substitute(v, tokens) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, tokens) for k, v in value.items()}
    return value


def page_tokens(payload: dict[str, Any]) -> dict[str, str]:
    url = urlsplit(payload["task_url"])
    return {
        "{fixture_url}": payload["task_url"],
        "{fixture_origin}": f"{url.scheme}://{url.netloc}",
        "{fixture_host}": url.netloc,
        "{artifact_dir}": payload.get("artifact_dir") or "",
    }


def evaluate_check(
    check: dict[str, Any], steps: list[dict[str, Any]], saved: dict[str, str]
) -> tuple[bool, str]:
    kind = check.get("kind")
    index = check.get("step")
    step = steps[index] if isinstance(index, int) and 0 <= index < len(steps) else None
    value = saved.get(check.get("name", ""))
    shown = f"saved {check.get('name')}={json.dumps(value)}"
    if kind == "step_ok":
        return (
            bool(step and step["ok"]),
            "step ok" if step and step["ok"] else f"step: {step and step.get('error')}",
        )
    if kind == "step_fails":
        return (bool(step and not step["ok"]), f"step error: {step and step.get('error')}")
    if kind == "saved_equals":
        return value == check.get("expected"), shown
    if kind == "saved_contains":
        return isinstance(value, str) and check.get("expected", "") in value, shown
    if kind == "saved_not_contains":
        return isinstance(value, str) and check.get("expected", "") not in value, shown
    if kind == "saved_truthy":
        return isinstance(value, str) and value not in FALSY_TEXT and not value.startswith(
            "ERROR:"
        ), shown
    if kind == "file_nonempty":
        try:
            size = os.path.getsize(check["path"])
        except OSError:
            return False, f"no file {check.get('path')}"
        return size > 0, f"{check['path']}: {size} bytes"
    if kind == "any_of":
        parts = [
            evaluate_check(c, steps, saved)
            for c in check.get("any_of") or check.get("checks") or []
        ]
        return any(ok for ok, _ in parts), " | ".join(text for _, text in parts)
    return False, f"unknown check kind {kind}"


def json_version(port: int, timeout: float) -> dict[str, Any]:
    import http.client  # here, not at start-up: lighter than urllib.request, and only once

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", "/json/version")
        return dict(json.loads(connection.getresponse().read()))
    finally:
        connection.close()


def http_identity_problem(payload: dict[str, Any], version: dict[str, Any]) -> str | None:
    if payload.get("expect_product") and version.get("Browser") != payload["expect_product"]:
        return f"/json/version Browser {version.get('Browser')!r} != expected {payload['expect_product']!r}"
    if payload.get("expect_ua") and version.get("User-Agent") != payload["expect_ua"]:
        return "/json/version User-Agent differs from the expected one"
    ws = version.get("webSocketDebuggerUrl")
    if ws and ws != payload.get("browser_ws"):
        return f"/json/version webSocketDebuggerUrl {ws} != browser_ws {payload.get('browser_ws')}"
    return None


class OpTrace:
    """The op trace (cdp.jsonl beside the attempt's artifacts, best effort by contract): records
    are kept in memory and written once when the attempt ends, not opened and appended per op."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.folder = payload.get("artifact_dir") or None
        self.records: list[str] = []

    def add(self, record: dict[str, Any]) -> None:
        if self.folder:
            self.records.append(json.dumps(record))

    def flush(self) -> None:
        if not self.records or not self.folder:
            return
        try:
            os.makedirs(self.folder, exist_ok=True)
            with open(os.path.join(self.folder, "cdp.jsonl"), "a") as handle:
                handle.write("\n".join(self.records) + "\n")
        except OSError:
            pass  # tracing is best effort by contract


# Ops that need no page: they run even after a new_page failed.
PAGELESS = frozenset(
    {"new_page", "wait_ms", "version", "user_agent", "contexts_count", "write_file"}
    | {"get_console", "get_dialogs", "get_recorded_requests"}
)
_VOCABULARY: dict[str, Any] | None = None


def missing_op(driver_key: str, op: str) -> str:
    """The step error for an op this driver's table lacks: the vocabulary's named refusal
    (drivers/ops.json, read only on this path), or ``unknown op`` outside the vocabulary."""
    global _VOCABULARY
    if _VOCABULARY is None:
        try:
            with open(os.path.join(os.path.dirname(__file__), "..", "ops.json")) as handle:
                _VOCABULARY = json.load(handle)
        except (OSError, ValueError):
            _VOCABULARY = {}
    entry = next((o for o in _VOCABULARY.get("ops", []) if o.get("op") == op), None)
    if entry is None:
        return f"unknown op {op}"
    why = (entry.get("cells") or {}).get(driver_key, {}).get("cannot") or "do this in this adapter"
    library = (_VOCABULARY.get("paths") or {}).get(driver_key, {}).get("library") or driver_key
    return f"unsupported op: {op} ({library} cannot {why})"


def harness_error(cls: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"class": cls, "message": message}}


async def run_steps(
    driver: Driver, session: Any, steps: list[dict[str, Any]], state: State
) -> list[dict[str, Any]]:
    results = []
    tracer = OpTrace(state.payload)
    page_lost: str | None = None  # a failed new_page: later page ops must not use the old page
    for index, step in enumerate(steps):
        if state.mark is not None:
            state.mark(f"op{index}:{step.get('op')}")
        started = time.monotonic()
        op = driver.ops.get(step.get("op", ""))
        if op is None:
            record: dict[str, Any] = {
                "ok": False,
                "error": missing_op(driver.key, str(step.get("op"))),
            }
        elif page_lost and step.get("op") not in PAGELESS:
            record = {"ok": False, "error": page_lost}
        elif state.budget.remaining() <= 0.001:
            record = {"ok": False, "error": "task budget exhausted before this op"}
        else:
            try:
                value = await asyncio.wait_for(
                    op(session, step, state), state.budget.remaining() + 0.1
                )
                record = {"ok": True, "value": value}
            except Exception as exc:  # an op's failure is the step's result, never the adapter's
                record = {"ok": False, "error": (str(exc) or type(exc).__name__).splitlines()[0]}
        if step.get("op") == "new_page":
            page_lost = (
                None
                if record["ok"]
                else f"no page: new_page at step {index} failed ({record['error']})"
            )
        if step.get("save_as"):
            state.saved[step["save_as"]] = (
                stringify(record["value"]) if record["ok"] else f"ERROR: {record['error']}"
            )
        results.append(record)
        elapsed_ms = int((time.monotonic() - started) * 1000)
        tracer.add(
            {"step": index, "op": step.get("op"), "ok": record["ok"], "ms": elapsed_ms,
             "error": record.get("error")}
        )  # fmt: skip
    tracer.flush()
    return results


async def _wait_ms(session: Any, step: dict[str, Any], state: State) -> Any:
    await asyncio.sleep(min(step.get("ms") or 0, state.budget.remaining() * 1000) / 1000)
    return step.get("ms")


async def _write_file(session: Any, step: dict[str, Any], state: State) -> str:
    os.makedirs(os.path.dirname(step["path"]) or ".", exist_ok=True)
    with open(step["path"], "w") as handle:
        handle.write(step.get("content") or "")
    return str(step["path"])


# Ops every adapter spells alike: they touch the adapter's own state or the file system only.
LOCAL_OPS: dict[str, Op] = {"wait_ms": _wait_ms, "write_file": _write_file}


@dataclass
class Driver:
    name: str
    key: str  # the driver path's key in drivers/ops.json
    connect: Callable[[dict[str, Any], Budget], Awaitable[Any]]
    live_product: Callable[[Any], Awaitable[str]]
    close: Callable[[Any], Awaitable[None]]
    ops: dict[str, Op]
    # where the driver can open an attempt's pages: "context" (a browser context of the
    # attempt's own) and/or "shared" (the engine's default context); the first when the
    # payload asks for one it cannot do
    isolations: tuple[str, ...] = ("context", "shared")

    def isolation_for(self, payload: dict[str, Any]) -> str:
        asked = payload.get("isolation")
        return asked if asked in self.isolations else self.isolations[0]


async def attempt(driver: Driver, payload: dict[str, Any]) -> dict[str, Any]:
    mark = OpMarks(payload) if OpMarks.wanted(payload) else None  # no listener: no machinery
    try:
        return await _marked_attempt(driver, payload, mark)
    finally:
        if mark is not None:
            mark.close()


async def _marked_attempt(
    driver: Driver, payload: dict[str, Any], mark: OpMarks | None
) -> dict[str, Any]:
    if payload.get("protocol") != "abb_scenario_adapter/1":
        return harness_error("script_error", f"unsupported protocol {payload.get('protocol')!r}")
    budget = Budget(payload)
    try:
        version = await asyncio.to_thread(json_version, payload["cdp_port"], budget.wait(5000))
    except Exception as exc:  # socket, HTTP or JSON trouble: the gate cannot pass
        return harness_error("script_error", f"GET /json/version failed: {exc}")
    problem = http_identity_problem(payload, version)
    if problem:
        return harness_error("script_error", f"binding gate: {problem}")
    tokens = page_tokens(payload)
    steps = substitute(payload.get("steps") or [], tokens)
    checks = substitute(payload.get("checks") or [], tokens)
    connect_row = {"name": "driver_connect", "status": "pass", "evidence": driver.name}
    if mark is not None:
        mark("driver_connect")
    try:
        session = await asyncio.wait_for(
            driver.connect(payload, budget), budget.wait(payload.get("connect_timeout_ms"))
        )
        session.isolation = driver.isolation_for(payload)
    except Exception as exc:  # an engine the driver cannot attach to is a benchmark result
        connect_row.update(status="fail", evidence=f"connect failed: {exc}")
        rows = [connect_row] + [
            {
                "name": c.get("label") or c.get("kind"),
                "status": "fail",
                "evidence": "driver not connected",
            }
            for c in checks
        ]
        return {
            "ok": True,
            "answer": f"0/{len(rows)} checks",
            "observations": {"checks": rows, "saved": {}, "failure_class": "cdp_semantic"},
        }
    try:
        live = await driver.live_product(session)
        if payload.get("expect_product_live") and live != payload["expect_product_live"]:
            return harness_error(
                "script_error",
                f"binding gate: live product {live!r} != {payload['expect_product_live']!r}",
            )
        state = State(payload, budget, mark=mark)
        results = await run_steps(driver, session, steps, state)
        if mark is not None:
            mark("driver_close")  # the checks, the session's close, the result
        rows = [connect_row]
        for check in checks:
            ok, evidence = evaluate_check(check, results, state.saved)
            rows.append(
                {
                    "name": check.get("label") or check.get("kind"),
                    "status": "pass" if ok else "fail",
                    "evidence": evidence,
                }
            )
        passed = sum(1 for r in rows if r["status"] == "pass")
        observations: dict[str, Any] = {
            "checks": rows,
            "saved": state.saved,
            "binding": {
                "verified": True,
                "http_product": version.get("Browser"),
                "live_product": live,
            },
        }
        if passed != len(rows):
            observations["failure_class"] = "cdp_semantic"
        return {
            "ok": True,
            "answer": f"{passed}/{len(rows)} checks",
            "observations": observations,
            "metrics": getattr(session, "metrics", {}),
            "isolation": session.isolation,
        }
    finally:
        try:
            await driver.close(session)
        except Exception as exc:
            print(f"close: {exc}", file=sys.stderr)


def main(driver: Driver) -> None:
    """Exactly one JSON object reaches stdout per payload, whatever happens inside.

    One-shot (the contract's default): one payload on stdin up to EOF. ``--serve`` (metewand's
    long-lived mode): one payload per stdin line, one result line each, until stdin closes;
    every attempt still connects and opens its own page, only the process is shared."""
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # a library's stray print must not corrupt the result
    if "--list-ops" in sys.argv[1:]:
        real_stdout.write(json.dumps(sorted(driver.ops)) + "\n")
        real_stdout.flush()
        os._exit(0)
    if "--serve" in sys.argv[1:]:
        for line in sys.stdin:
            if line.strip():
                real_stdout.write(json.dumps(_guarded(driver, line)) + "\n")
                real_stdout.flush()
    else:
        real_stdout.write(json.dumps(_guarded(driver, sys.stdin.read())) + "\n")
        real_stdout.flush()
    os._exit(0)  # library threads (websocket readers) must not hold the exit


def _guarded(driver: Driver, text: str) -> dict[str, Any]:
    payload: Any = None
    try:
        payload = json.loads(text)
        result = asyncio.run(attempt(driver, payload))
    except Exception as exc:
        import traceback

        traceback.print_exc()
        result = harness_error("script_error", str(exc))
    if isinstance(payload, dict) and "attempt_id" in payload:
        result["attempt_id"] = payload["attempt_id"]  # a result counts only for its own attempt
    return result
