"""The Selenium path's ops beyond element actions: pages, frames, dialogs, logs, files, cookies,
and the accessibility/CSS observations through ``execute_cdp_cmd`` (Selenium's Chromium API;
it sends commands to the current window's target and delivers no events, so request routing is
refused in drivers/ops.json). Each sync function runs in a worker thread with the session."""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import raw_cdp_more
import raw_cdp_ops
from adapter_common import State
from selenium.common.exceptions import NoAlertPresentException, NoSuchElementException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

EVAL = "return (0, eval)(arguments[0]);"
# Logs chromedriver keeps only when the task reads them (set at connect from the payload's ops).
LOG_OPS = {"browser": {"get_console"}, "performance": {"record_requests", "get_recorded_requests"}}
DIALOG_OPS = {"on_dialog", "get_dialogs"}


@dataclass
class Extras:
    """What the Selenium path records for the vocabulary's observation ops."""

    handles: list[str] = field(default_factory=list)  # windows this attempt opened, newest last
    dialogs: list[str] = field(default_factory=list)
    dialog_policy: dict[str, Any] = field(default_factory=lambda: {"action": "dismiss"})
    watch_dialogs: bool = False
    console: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    recording: str | None = None


def capabilities(payload: dict[str, Any]) -> dict[str, Any]:
    """Logging and prompt capabilities for the ops this task uses, nothing when it uses none."""
    ops = {step.get("op") for step in payload.get("steps") or []}
    prefs = {log: "ALL" for log, readers in LOG_OPS.items() if ops & readers}
    caps: dict[str, Any] = {"goog:loggingPrefs": prefs} if prefs else {}
    if ops & DIALOG_OPS:
        caps["unhandledPromptBehavior"] = "ignore"  # the adapter answers them (answer_dialog)
    return caps


def answer_dialog(s: Any) -> bool:
    """An open dialog, answered by the task's policy and recorded; False when none is open."""
    try:
        alert = s.driver.switch_to.alert
        text = alert.text
    except NoAlertPresentException:
        return False
    s.extras.dialogs.append(f"dialog:{text}")  # WebDriver classic reports no dialog type
    policy = s.extras.dialog_policy
    if policy["action"] == "accept":
        if policy.get("text") is not None:
            alert.send_keys(policy["text"])
        alert.accept()
    else:
        alert.dismiss()
    return True


def _close_page(s: Any, step: dict[str, Any], state: State) -> str:
    if not s.extras.handles:
        raise RuntimeError("no page to close")
    s.driver.switch_to.window(s.extras.handles.pop())
    s.driver.close()
    remaining = s.extras.handles or list(s.original_handles)
    s.driver.switch_to.window(remaining[-1])
    return "closed"


def _frame_evaluate(s: Any, step: dict[str, Any], state: State) -> Any:
    driver = s.driver
    try:
        for frame in driver.find_elements(By.CSS_SELECTOR, "iframe, frame"):
            driver.switch_to.frame(frame)
            if step["url_contains"] in driver.execute_script("return location.href"):
                return driver.execute_script(EVAL, step["expression"])
            driver.switch_to.default_content()
    finally:
        driver.switch_to.default_content()
    raise RuntimeError(f"no frame whose url contains {step['url_contains']}")


def _now(s: Any, selector: str) -> Any:
    """The element as the page is now: none there fails at once."""
    try:
        return s.driver.find_element(By.CSS_SELECTOR, selector)
    except NoSuchElementException as exc:
        raise RuntimeError(f"no element matches {selector}") from exc


def _is_visible(s: Any, step: dict[str, Any], state: State) -> bool:
    found = s.driver.find_elements(By.CSS_SELECTOR, step["selector"])
    return bool(found) and bool(found[0].is_displayed())


def _console(s: Any, step: dict[str, Any], state: State) -> str:
    for entry in s.driver.get_log("browser"):
        s.extras.console.append(f"{entry['level'].lower()}:{entry['message']}")
    return "\n".join(s.extras.console)


def _drain_requests(s: Any) -> None:
    for entry in s.driver.get_log("performance"):
        message = json.loads(entry["message"]).get("message", {})
        if message.get("method") == "Network.requestWillBeSent" and s.extras.recording:
            request = message["params"]["request"]
            if raw_cdp_more.glob_matches(request["url"], s.extras.recording):
                s.extras.requests.append(f"{request['method']} {request['url']}")


def _record(s: Any, step: dict[str, Any], state: State) -> str:
    s.driver.get_log("performance")  # what came before is not recorded
    s.extras.recording = step.get("pattern") or "**"
    return "recording"


def _recorded(s: Any, step: dict[str, Any], state: State) -> str:
    _drain_requests(s)
    return "\n".join(s.extras.requests)


def _download(s: Any, step: dict[str, Any], state: State) -> str:
    folder = os.path.dirname(step["path"])
    os.makedirs(folder, exist_ok=True)
    before = set(os.listdir(folder))
    s.driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": folder})
    _now(s, step["selector"]).click()
    end = time.monotonic() + state.budget.wait(step.get("timeout_ms"))
    while time.monotonic() < end:
        new = [n for n in set(os.listdir(folder)) - before if not n.endswith(".crdownload")]
        if new:
            os.replace(os.path.join(folder, new[0]), step["path"])
            return raw_cdp_more.file_digest(step["path"])
        time.sleep(0.05)
    raise TimeoutError("timed out waiting for download")


def _set_cookie(s: Any, step: dict[str, Any], state: State) -> str:
    s.driver.add_cookie({"name": step["name"], "value": str(step.get("value") or ""), "path": "/"})
    return str(step["name"])


def _extra_headers(s: Any, step: dict[str, Any], state: State) -> str:
    s.driver.execute_cdp_cmd("Network.enable", {})
    s.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": step["headers"]})
    return ",".join(step["headers"])


def _on_dialog(s: Any, step: dict[str, Any], state: State) -> str:
    s.extras.dialog_policy = {"action": step.get("action") or "accept", "text": step.get("text")}
    s.extras.watch_dialogs = True
    return str(step.get("action") or "accept")


def _read(expression: str) -> Any:
    def op(s: Any, step: dict[str, Any], state: State) -> Any:
        return s.driver.execute_script(f"return (e => {expression})(arguments[0]);", _now(s, step["selector"]))

    return op


SYNC_OPS: dict[str, Any] = {
    "close_page": _close_page, "frame_evaluate": _frame_evaluate, "is_visible": _is_visible,
    "hover": lambda s, step, state: (ActionChains(s.driver).move_to_element(_now(s, step["selector"])).perform(), step["selector"])[1],
    "keyboard_type": lambda s, step, state: (ActionChains(s.driver).send_keys(step["text"]).perform(), step["text"])[1],
    "text_content": _read("e.textContent"), "inner_text": _read("e.innerText"), "input_value": _read("e.value"),
    "is_checked": lambda s, step, state: _now(s, step["selector"]).is_selected(),
    "is_enabled": lambda s, step, state: _now(s, step["selector"]).is_enabled(),
    "get_attribute": lambda s, step, state: _now(s, step["selector"]).get_attribute(step["name"]),
    "content": lambda s, step, state: s.driver.page_source,
    "version": lambda s, step, state: s.driver.execute_cdp_cmd("Browser.getVersion", {})["product"],
    "set_extra_headers": _extra_headers,
    "record_requests": _record, "get_recorded_requests": _recorded, "get_console": _console,
    "on_dialog": _on_dialog, "get_dialogs": lambda s, step, state: "\n".join(s.extras.dialogs),
    "set_input_files": lambda s, step, state: (_now(s, step["selector"]).send_keys(step["path"]), step["path"])[1],
    "download": _download, "set_cookie": _set_cookie,
    "get_cookies": lambda s, step, state: s.driver.get_cookies(),
}  # fmt: skip


class CdpBridge:
    """``send`` for the protocol-direct observation ops, through execute_cdp_cmd."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return dict(await asyncio.to_thread(self.driver.execute_cdp_cmd, method, params))


def _bridged(fn: Any) -> Any:
    async def op(s: Any, step: dict[str, Any], state: State) -> Any:
        return await fn(CdpBridge(s.driver), step, state)

    return op


CDP_OPS: dict[str, Any] = {
    name: _bridged(fn)
    for name, fn in {
        "ax_snapshot": raw_cdp_ops.OPS["ax_snapshot"], "ax_node_identity": raw_cdp_ops.ax_node_identity,
        "computed_style_breadth": raw_cdp_ops.computed_style_breadth, "aria_snapshot": raw_cdp_more.aria_snapshot,
    }.items()
}  # fmt: skip
