"""The op table for a protocol-direct Python client: page actions as CDP input events, reads as
Runtime.evaluate, observation ops as their CDP calls. A session supplies ``send(method, params)``
(bound to its page session) and ``events`` (names of page events seen, in order)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from adapter_common import State

LOADED = ("Page.loadEventFired",)
# A history move may be same-document or a back-forward-cache restore: neither fires load.
MOVED = ("Page.loadEventFired", "Page.navigatedWithinDocument", "Page.frameNavigated")
KEYS = {
    "Enter": {"code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"},
    "Tab": {"code": "Tab", "windowsVirtualKeyCode": 9},
    "Escape": {"code": "Escape", "windowsVirtualKeyCode": 27},
    "Backspace": {"code": "Backspace", "windowsVirtualKeyCode": 8},
}
DEFAULT_REQUIRED = ["display", "visibility", "opacity", "pointer-events"]


class PageEvents(list[str]):
    """The names of the page events a session saw, in order. ``arrived`` is set at each one, so
    a poll waiting on an event wakes when it lands, not at its next 50 ms tick (a load event
    comes a few ms after Page.navigate answers: polling alone paid ~50 ms for it)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = asyncio.Event()

    def saw(self, name: str) -> None:
        self.append(name)
        self.arrived.set()


async def poll(
    state: State, limit_ms: Any, probe: Any, what: str, wake: asyncio.Event | None = None
) -> Any:
    """``probe()`` every 50 ms until it answers, and at once when ``wake`` is set (cleared
    before each probe, so an event landing during the probe is not missed)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + state.budget.wait(limit_ms)
    while True:
        if wake is not None:
            wake.clear()
        value = await probe()
        if value:
            return value
        if loop.time() >= end:
            raise TimeoutError(f"timed out waiting for {what}")
        if wake is None:
            await asyncio.sleep(0.05)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), 0.05)


async def evaluate(s: Any, expression: str) -> Any:
    reply = await s.send(
        "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
    )
    if reply.get("exceptionDetails"):
        details = reply["exceptionDetails"]
        raise RuntimeError(
            (details.get("exception") or {}).get("description")
            or details.get("text")
            or "evaluation threw"
        )
    return reply["result"].get("value")


async def navigation(s: Any, state: State, action: Any, events: tuple[str, ...] = LOADED) -> None:
    seen = len(s.events)
    if await action() is None:
        return  # a same-document goto fires no load event
    await poll(
        state,
        None,
        _async(lambda: any(e in events for e in s.events[seen:])),
        "|".join(events),
        getattr(s.events, "arrived", None),
    )
    await poll(state, None, lambda: _not_loading(s), "document parsed")


def _async(fn: Any) -> Any:
    async def wrapped() -> Any:
        return fn()

    return wrapped


async def _not_loading(s: Any) -> bool:
    return bool(await evaluate(s, "document.readyState") != "loading")


def q(selector: str) -> str:
    return f"document.querySelector({json.dumps(selector)})"


async def wait_element(s: Any, step: dict[str, Any], state: State) -> None:
    await poll(
        state,
        step.get("timeout_ms"),
        lambda: evaluate(s, f"!!{q(step['selector'])}"),
        f"selector {step['selector']}",
    )


async def click(s: Any, step: dict[str, Any], state: State) -> str:
    point = await center(s, step, state)
    x, y = point["x"], point["y"]
    for _ in range(step.get("times") or 1):
        await s.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            await s.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )
    return str(step["selector"])


async def press_key(s: Any, key: str) -> None:
    known = KEYS.get(key) or {
        "code": f"Key{key.upper()}" if len(key) == 1 else key,
        **({"text": key} if len(key) == 1 else {}),
    }
    await s.send(
        "Input.dispatchKeyEvent",
        {"type": "keyDown" if "text" in known else "rawKeyDown", "key": key, **known},
    )
    up = {k: v for k, v in known.items() if k != "text"}
    await s.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, **up})


async def type_text(s: Any, text: str) -> None:
    for char in text:
        await s.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": char, "text": char})
        await s.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": char})


async def hover(s: Any, step: dict[str, Any], state: State) -> str:
    point = await center(s, step, state)
    await s.send("Input.dispatchMouseEvent", {"type": "mouseMoved", **point})
    return str(step["selector"])


async def center(s: Any, step: dict[str, Any], state: State) -> dict[str, float]:
    await wait_element(s, step, state)
    point = await evaluate(
        s,
        f"""(() => {{ const e = {q(step["selector"])}; e.scrollIntoView({{block: 'center', inline: 'center'}});
        const r = e.getBoundingClientRect(); return {{x: r.left + r.width / 2, y: r.top + r.height / 2}}; }})()""",
    )
    return {"x": point["x"], "y": point["y"]}


async def focus(s: Any, step: dict[str, Any], state: State) -> None:
    await wait_element(s, step, state)
    await evaluate(s, f"{q(step['selector'])}.focus()")


async def history_move(s: Any, step: dict[str, Any], state: State, delta: int) -> Any:
    history = await s.send("Page.getNavigationHistory", {})
    index = history["currentIndex"] + delta
    if not 0 <= index < len(history["entries"]):
        if step.get("optional"):
            return "no-history-entry"
        raise RuntimeError("no history entry to move to")

    async def move() -> str:
        await s.send("Page.navigateToHistoryEntry", {"entryId": history["entries"][index]["id"]})
        return "moved"

    await navigation(s, state, move, MOVED)
    return await evaluate(s, "location.href")


async def goto(s: Any, step: dict[str, Any], state: State) -> Any:
    async def navigate() -> Any:
        reply = await s.send("Page.navigate", {"url": step["url"]})
        if reply.get("errorText"):
            raise RuntimeError(reply["errorText"])
        return reply.get("loaderId")

    await navigation(s, state, navigate)
    return await evaluate(s, "location.href")


async def reload(s: Any, step: dict[str, Any], state: State) -> Any:
    async def again() -> str:
        await s.send("Page.reload", {})
        return "reloaded"

    await navigation(s, state, again)
    return await evaluate(s, "location.href")


async def wait_for_selector(s: Any, step: dict[str, Any], state: State) -> bool:
    sel = q(step["selector"])
    visible = f"""(() => {{ const e = {sel}; if (!e) return false; const r = e.getBoundingClientRect();
        return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; }})()"""
    wanted = step.get("state") or "attached"  # as before: present unless a state is named
    test = {"hidden": f"!({visible})", "detached": f"!({visible})", "attached": f"!!{sel}"}.get(wanted, visible)
    await poll(
        state, step.get("timeout_ms"), lambda: evaluate(s, test), f"selector {step['selector']}"
    )
    return True


async def fill(s: Any, step: dict[str, Any], state: State) -> str:
    await focus(s, step, state)
    await evaluate(s, f"(() => {{ const e = {q(step['selector'])}; if (e.select) e.select(); }})()")
    if step["value"] == "":
        await press_key(s, "Backspace")
    else:
        await s.send("Input.insertText", {"text": step["value"]})
    return str(step["value"])


async def set_checked(s: Any, step: dict[str, Any], state: State, wanted: bool) -> bool:
    await wait_element(s, step, state)
    if bool(await evaluate(s, f"!!{q(step['selector'])}.checked")) != wanted:
        await click(s, step, state)
    return wanted


async def select_option(s: Any, step: dict[str, Any], state: State) -> Any:
    await wait_element(s, step, state)
    return await evaluate(
        s,
        f"""(() => {{ const e = {q(step["selector"])}; e.value = {json.dumps(step["value"])};
        e.dispatchEvent(new Event('input', {{bubbles: true}})); e.dispatchEvent(new Event('change', {{bubbles: true}})); return e.value; }})()""",
    )


def read(field: str) -> Any:
    async def op(s: Any, step: dict[str, Any], state: State) -> Any:
        await wait_element(s, step, state)
        return await evaluate(s, f"{q(step['selector'])}.{field}")

    return op


async def ax_nodes(s: Any) -> list[dict[str, Any]]:
    tree = await s.send("Accessibility.getFullAXTree", {})
    value = lambda f: str((f or {}).get("value", ""))  # noqa: E731
    return [
        {
            "role": value(n.get("role")),
            "name": value(n.get("name")),
            "backendDOMNodeId": n.get("backendDOMNodeId"),
            "ignored": bool(n.get("ignored")),
        }
        for n in tree.get("nodes", [])
    ]


async def ax_node_identity(s: Any, step: dict[str, Any], state: State) -> str:
    nodes = await ax_nodes(s)
    match = next(
        (
            n
            for n in nodes
            if not n["ignored"] and n["role"] == step["role"] and n["name"] == step["name"]
        ),
        None,
    )
    if match is None:
        raise RuntimeError(f"no AX node with role={step['role']} name={step['name']}")
    identity = (
        f"role={match['role']}|name={match['name']}|backendDOMNodeId={match['backendDOMNodeId']}"
    )
    if not step.get("compare_to"):
        return identity
    return ("stable|" if state.saved.get(step["compare_to"]) == identity else "changed|") + identity


async def computed_style_breadth(s: Any, step: dict[str, Any], state: State) -> str:
    root = (await s.send("DOM.getDocument", {"depth": 0}))["root"]["nodeId"]
    node = (await s.send("DOM.querySelector", {"nodeId": root, "selector": step["selector"]})).get(
        "nodeId"
    )
    if not node:
        raise RuntimeError(f"no element for {step['selector']}")
    await s.send("CSS.enable", {})
    style = await s.send("CSS.getComputedStyleForNode", {"nodeId": node})
    values = {p["name"]: p["value"] for p in style.get("computedStyle", [])}
    verdict = (
        "breadth-ok" if len(values) >= (step.get("min_property_count") or 100) else "breadth-short"
    )
    parts = [
        f"{name}={values.get(name, 'MISSING')}"
        for name in step.get("required_properties") or DEFAULT_REQUIRED
    ]
    return "|".join([verdict, f"count={len(values)}", *parts])


def simple(expression: str) -> Any:
    async def op(s: Any, step: dict[str, Any], state: State) -> Any:
        return await evaluate(s, expression)

    return op


async def wait_for_function(s: Any, step: dict[str, Any], state: State) -> bool:
    await poll(
        state, step.get("timeout_ms"), lambda: evaluate(s, step["expression"]), step["expression"]
    )
    return True


async def _press(s: Any, step: dict[str, Any], state: State) -> str:
    if step.get("selector"):
        await focus(s, step, state)
    await press_key(s, step["key"])
    return str(step["key"])


async def _focus(s: Any, step: dict[str, Any], state: State) -> str:
    await focus(s, step, state)
    return str(step["selector"])


async def _type(s: Any, step: dict[str, Any], state: State) -> str:
    await focus(s, step, state)
    text = step.get("value", step.get("text", ""))
    await type_text(s, str(text))
    return str(text)


async def _keyboard_type(s: Any, step: dict[str, Any], state: State) -> str:
    await type_text(s, str(step["text"]))
    return str(step["text"])


async def _get_attribute(s: Any, step: dict[str, Any], state: State) -> Any:
    await wait_element(s, step, state)
    return await evaluate(s, f"{q(step['selector'])}.getAttribute({json.dumps(step['name'])})")


async def _count(s: Any, step: dict[str, Any], state: State) -> Any:
    return await evaluate(s, f"document.querySelectorAll({json.dumps(step['selector'])}).length")


async def _evaluate(s: Any, step: dict[str, Any], state: State) -> Any:
    return await evaluate(s, step["expression"])


async def _user_agent(s: Any, step: dict[str, Any], state: State) -> Any:
    if getattr(s, "session_id", None) is None:  # no page yet: the browser-level answer
        return (await s.send("Browser.getVersion", {}))["userAgent"]
    return await evaluate(s, "navigator.userAgent")


async def _ax_snapshot(s: Any, step: dict[str, Any], state: State) -> Any:
    return await ax_nodes(s)


OPS: dict[str, Any] = {
    "goto": goto, "reload": reload,
    "go_back": lambda s, step, state: history_move(s, step, state, -1),
    "go_forward": lambda s, step, state: history_move(s, step, state, +1),
    "evaluate": _evaluate, "wait_for_function": wait_for_function, "wait_for_selector": wait_for_selector,
    "click": click, "hover": hover, "keyboard_type": _keyboard_type,
    "check": lambda s, step, state: set_checked(s, step, state, True),
    "uncheck": lambda s, step, state: set_checked(s, step, state, False), "focus": _focus, "fill": fill, "type": _type, "press": _press,
    "select_option": select_option, "text_content": read("textContent"), "input_value": read("value"),
    "is_checked": read("checked"), "get_attribute": _get_attribute, "count": _count,
    "url": simple("location.href"), "title": simple("document.title"), "user_agent": _user_agent,
    "ax_snapshot": _ax_snapshot, "ax_node_identity": ax_node_identity, "computed_style_breadth": computed_style_breadth,
}  # fmt: skip
