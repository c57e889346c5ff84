"""The vocabulary's page-state, network, dialog, file, cookie and frame ops for a protocol-direct
Python client, each the CDP command(s) that express it. Beside ``raw_cdp_ops``' contract a
session supplies ``browser_send(method, params)`` on the browser connection,
``on(method, handler)`` for the current page's events, ``on_browser(method, handler)`` for
browser-level ones, ``send_to(session_id, method, params)`` for an attached frame target, and
``context_id`` (the attempt's browser context, or None)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
from typing import Any

import raw_cdp_ops
from adapter_common import State
from raw_cdp_ops import evaluate, q


def glob_matches(url: str, pattern: str | None) -> bool:
    """A glob (``**`` crosses ``/``, ``*`` does not, ``?`` one char) or else a substring."""
    if not pattern:
        return True
    if not re.search(r"[*?]", pattern):
        return pattern in url
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        char = pattern[i]
        out += "[^/]*" if char == "*" else "." if char == "?" else re.escape(char)
        i += 1
    return re.fullmatch(out, url) is not None


def _remote_text(arg: dict[str, Any]) -> str:
    if "value" in arg:
        value = arg["value"]
        return value if isinstance(value, str) else json.dumps(value)
    return str(arg.get("description") or arg.get("type"))


class Recorders:
    """What a page's events leave behind: console lines, dialogs, requests, routes, and the main
    world of each frame."""

    def __init__(self) -> None:
        self.console: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.routes: list[dict[str, Any]] = []
        self.frame_contexts: dict[str, int] = {}
        self.recording: str | None = None
        self.dialog_policy: dict[str, Any] = {"action": "dismiss"}
        self.fetching = False


async def watch_page(s: Any) -> None:
    """Wires the recorders to the current page's events (call after each new page)."""
    rec: Recorders = s.recorders

    def console(e: dict[str, Any]) -> None:
        rec.console.append(f"{e['type']}:{' '.join(_remote_text(a) for a in e.get('args', []))}")

    def context(e: dict[str, Any]) -> None:
        aux = e["context"].get("auxData") or {}
        if aux.get("isDefault") and aux.get("frameId"):
            rec.frame_contexts[aux["frameId"]] = e["context"]["id"]

    def dialog(e: dict[str, Any]) -> None:
        rec.dialogs.append(f"{e['type']}:{e['message']}")
        policy = rec.dialog_policy
        answer: dict[str, Any] = {"accept": policy["action"] == "accept"}
        if policy.get("text") is not None:
            answer["promptText"] = policy["text"]
        _spawn(s.send("Page.handleJavaScriptDialog", answer))

    def request(e: dict[str, Any]) -> None:
        if rec.recording and glob_matches(e["request"]["url"], rec.recording):
            rec.requests.append(f"{e['request']['method']} {e['request']['url']}")

    def paused(e: dict[str, Any]) -> None:
        _spawn(_answer_paused(s, e))

    for method, handler in {
        "Runtime.consoleAPICalled": console, "Runtime.executionContextCreated": context,
        "Page.javascriptDialogOpening": dialog, "Network.requestWillBeSent": request,
        "Fetch.requestPaused": paused,
    }.items():  # fmt: skip
        await s.on(method, handler)
    if rec.fetching:
        await s.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})


_PENDING: set[asyncio.Task[Any]] = set()


def _spawn(coroutine: Any) -> None:
    task = asyncio.ensure_future(coroutine)
    _PENDING.add(task)  # kept until done: a dropped task may be collected mid-flight
    task.add_done_callback(_PENDING.discard)


async def _answer_paused(s: Any, e: dict[str, Any]) -> None:
    route = next((r for r in s.recorders.routes if glob_matches(e["request"]["url"], r["pattern"])), None)
    if route is None:
        await s.send("Fetch.continueRequest", {"requestId": e["requestId"]})
    elif route.get("abort"):
        await s.send("Fetch.failRequest", {"requestId": e["requestId"], "errorReason": "Failed"})
    else:
        await s.send(
            "Fetch.fulfillRequest",
            {
                "requestId": e["requestId"], "responseCode": route["status"],
                "responseHeaders": [{"name": "Content-Type", "value": route["content_type"]}],
                "body": base64.b64encode(route["body"].encode()).decode(),
            },
        )  # fmt: skip


async def _add_route(s: Any, step: dict[str, Any], route: dict[str, Any]) -> str:
    s.recorders.routes.append({"pattern": step["pattern"], **route})
    if not s.recorders.fetching:
        await s.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})
        s.recorders.fetching = True
    return str(step["pattern"])


async def node_of(s: Any, selector: str) -> int:
    root = (await s.send("DOM.getDocument", {"depth": 0}))["root"]["nodeId"]
    node = (await s.send("DOM.querySelector", {"nodeId": root, "selector": selector})).get("nodeId")
    if not node:
        raise RuntimeError(f"no element matches {selector}")
    return int(node)


def _ax(field: Any) -> str:
    return str((field or {}).get("value", "")) if isinstance(field, dict) else ""


async def aria_snapshot(s: Any, step: dict[str, Any], state: State) -> str:
    """The AX subtree under the element, one ``- role "name"`` line per node."""
    selector = step.get("selector") or "body"
    node = (await s.send("DOM.describeNode", {"nodeId": await node_of(s, selector)}))["node"]
    nodes = (await s.send("Accessibility.getFullAXTree", {}))["nodes"]
    by_id = {n["nodeId"]: n for n in nodes}
    root = next((n for n in nodes if n.get("backendDOMNodeId") == node["backendNodeId"]), None)
    if root is None:
        raise RuntimeError(f"no AX node for {selector}")
    lines: list[str] = []

    def walk(n: dict[str, Any], depth: int) -> None:
        role, name = _ax(n.get("role")), _ax(n.get("name"))
        shown = not n.get("ignored") and role not in ("", "none", "generic", "InlineTextBox")
        if shown:
            lines.append("  " * depth + f"- {role}" + (f" {json.dumps(name)}" if name else ""))
        for child in n.get("childIds") or []:
            if child in by_id:
                walk(by_id[child], depth + 1 if shown else depth)

    walk(root, 0)
    return "\n".join(lines)


async def frame_evaluate(s: Any, step: dict[str, Any], state: State) -> Any:
    """In the child frame whose URL contains url_contains: its main world, or (out of process)
    its own target attached to the browser connection."""
    tree = (await s.send("Page.getFrameTree", {}))["frameTree"]
    frames: list[dict[str, Any]] = []

    def walk(t: dict[str, Any]) -> None:
        frames.append(t["frame"])
        for child in t.get("childFrames") or []:
            walk(child)

    walk(tree)
    frame = next((f for f in frames if f.get("parentId") and step["url_contains"] in f.get("url", "")), None)
    params = {"expression": step["expression"], "returnByValue": True, "awaitPromise": True}
    if frame is not None and frame["id"] in s.recorders.frame_contexts:
        reply = await s.send("Runtime.evaluate", {**params, "contextId": s.recorders.frame_contexts[frame["id"]]})
    else:
        targets = (await s.browser_send("Target.getTargets", {}))["targetInfos"]
        target = next((t for t in targets if t["type"] == "iframe" and step["url_contains"] in t["url"]), None)
        if target is None:
            raise RuntimeError(f"no frame whose url contains {step['url_contains']}")
        attached = await s.browser_send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
        reply = await s.send_to(attached["sessionId"], "Runtime.evaluate", params)
    if reply.get("exceptionDetails"):
        details = reply["exceptionDetails"]
        raise RuntimeError((details.get("exception") or {}).get("description") or details.get("text"))
    return reply["result"].get("value")


async def download(s: Any, step: dict[str, Any], state: State) -> str:
    folder = os.path.dirname(step["path"])
    os.makedirs(folder, exist_ok=True)
    done: dict[str, str] = {}

    def progress(e: dict[str, Any]) -> None:
        if e.get("state") != "inProgress":
            done[e["guid"]] = e["state"]

    await s.on_browser("Browser.downloadProgress", progress)
    behaviour = {"behavior": "allowAndName", "downloadPath": folder, "eventsEnabled": True}
    if s.context_id:
        behaviour["browserContextId"] = s.context_id
    await s.browser_send("Browser.setDownloadBehavior", behaviour)
    await s.click(s, step, state)

    async def finished() -> Any:
        return next(iter(done.items()), None)

    guid, result = await raw_cdp_ops.poll(state, step.get("timeout_ms"), finished, "download")
    if result != "completed":
        raise RuntimeError(f"download {result}")
    os.replace(os.path.join(folder, guid), step["path"])
    return file_digest(step["path"])


def file_digest(path: str) -> str:
    with open(path, "rb") as handle:
        data = handle.read()
    return f"{hashlib.sha256(data).hexdigest()[:12]}:{len(data)}"


def _read(expression: str) -> Any:
    async def op(s: Any, step: dict[str, Any], state: State) -> Any:
        selector = step["selector"]
        return await evaluate(
            s,
            f"(() => {{ const e = {q(selector)}; if (!e) throw new Error({json.dumps('no element matches ' + selector)});"
            f" return {expression}; }})()",
        )

    return op


VISIBLE = """(() => { const e = %s; if (!e) return false; const r = e.getBoundingClientRect();
  const st = getComputedStyle(e); return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none'; })()"""


async def _extra_headers(s: Any, step: dict[str, Any], state: State) -> str:
    await s.send("Network.enable", {})
    await s.send("Network.setExtraHTTPHeaders", {"headers": step["headers"]})
    return ",".join(step["headers"])


async def _record(s: Any, step: dict[str, Any], state: State) -> str:
    s.recorders.recording = step.get("pattern") or "**"
    await s.send("Network.enable", {})
    return "recording"


async def _on_dialog(s: Any, step: dict[str, Any], state: State) -> str:
    s.recorders.dialog_policy = {"action": step.get("action") or "accept", "text": step.get("text")}
    return str(step.get("action") or "accept")


async def _input_files(s: Any, step: dict[str, Any], state: State) -> str:
    await s.send("DOM.setFileInputFiles", {"files": [step["path"]], "nodeId": await node_of(s, step["selector"])})
    return str(step["path"])


async def _set_cookie(s: Any, step: dict[str, Any], state: State) -> str:
    cookie = {"name": step["name"], "value": str(step.get("value") or ""), "url": step["url"]}
    reply = await s.send("Network.setCookie", cookie)
    if reply.get("success") is False:
        raise RuntimeError(f"cookie {step['name']} refused")
    return str(step["name"])


async def _get_cookies(s: Any, step: dict[str, Any], state: State) -> Any:
    return (await s.send("Network.getCookies", {"urls": [step["url"]]} if step.get("url") else {}))["cookies"]


async def _version(s: Any, step: dict[str, Any], state: State) -> Any:
    return (await s.browser_send("Browser.getVersion", {}))["product"]


async def _contexts(s: Any, step: dict[str, Any], state: State) -> int:
    return len((await s.browser_send("Target.getBrowserContexts", {}))["browserContextIds"]) + 1


def _recorded(field: str) -> Any:
    async def op(s: Any, step: dict[str, Any], state: State) -> str:
        return "\n".join(getattr(s.recorders, field))

    return op


async def _count(s: Any, step: dict[str, Any], state: State) -> Any:
    return await evaluate(s, f"document.querySelectorAll({json.dumps(step['selector'])}).length")


async def _visible(s: Any, step: dict[str, Any], state: State) -> Any:
    return await evaluate(s, VISIBLE % q(step["selector"]))


OPS: dict[str, Any] = {
    "content": raw_cdp_ops.simple("document.documentElement.outerHTML"),
    "text_content": _read("e.textContent"), "inner_text": _read("e.innerText"), "input_value": _read("e.value"),
    "is_checked": _read("!!e.checked"), "is_enabled": _read("!e.disabled"),
    "get_attribute": lambda s, step, state: _read(f"e.getAttribute({json.dumps(step['name'])})")(s, step, state),
    "is_visible": _visible, "count": _count, "version": _version, "contexts_count": _contexts,
    "frame_evaluate": frame_evaluate,
    "route_fulfill": lambda s, step, state: _add_route(s, step, {
        "status": step.get("status") or 200, "content_type": step.get("content_type") or "application/json",
        "body": "" if step.get("body") is None else str(step["body"])}),
    "route_abort": lambda s, step, state: _add_route(s, step, {"abort": True}),
    "set_extra_headers": _extra_headers, "record_requests": _record,
    "get_recorded_requests": _recorded("requests"), "get_console": _recorded("console"),
    "on_dialog": _on_dialog, "get_dialogs": _recorded("dialogs"),
    "set_input_files": _input_files, "download": download,
    "set_cookie": _set_cookie, "get_cookies": _get_cookies, "aria_snapshot": aria_snapshot,
}  # fmt: skip
