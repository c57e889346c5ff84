"""Selenium path, as the binding catalog routes it: Selenium's Python client → Debian's
chromedriver (started per attempt on a free port) → the running engine through
``debuggerAddress``. Ops go through WebDriver classic; the live identity gate is
``execute_cdp_cmd('Browser.getVersion')``. Selenium's API is synchronous, so each op runs in a
worker thread with the attempt's clamped timeouts."""

from __future__ import annotations

import asyncio
import shutil
from typing import Any

import selenium
import selenium_more
from adapter_common import LOCAL_OPS, Budget, Driver, State, main
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import UnexpectedAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

# Indirect eval: a corpus expression may hold statements; a returned promise is awaited by
# WebDriver itself.
EVAL = "return (0, eval)(arguments[0]);"
KEYS = {"Enter": Keys.ENTER, "Tab": Keys.TAB, "Escape": Keys.ESCAPE, "Backspace": Keys.BACKSPACE}


class Session:
    def __init__(self, driver: webdriver.Chrome) -> None:
        self.driver = driver
        self.original_handles = set(driver.window_handles)
        self.extras = selenium_more.Extras()
        self.metrics: dict[str, int] = {}


def _binding_bridge(payload: dict[str, Any]) -> str:
    """chromedriver from the payload's binding when it names one, else Debian's on PATH."""
    for bridge in ((payload.get("binding") or {}).get("pins") or {}).get("bridges") or []:
        if bridge.get("key") == "chromedriver" and bridge.get("executable"):
            return str(bridge["executable"])
    found = shutil.which("chromedriver")
    if found is None:
        raise RuntimeError("chromedriver not found on PATH")
    return found


def _start(payload: dict[str, Any]) -> Session:
    options = webdriver.ChromeOptions()
    options.debugger_address = f"127.0.0.1:{payload['cdp_port']}"
    for name, value in selenium_more.capabilities(payload).items():
        options.set_capability(name, value)
    service = Service(executable_path=_binding_bridge(payload))
    return Session(webdriver.Chrome(service=service, options=options))


async def connect(payload: dict[str, Any], budget: Budget) -> Session:
    return await asyncio.to_thread(_start, payload)


async def live_product(session: Session) -> str:
    version = await asyncio.to_thread(session.driver.execute_cdp_cmd, "Browser.getVersion", {})
    return str(version["product"])


def _stop(session: Session) -> None:
    for handle in set(session.driver.window_handles) - session.original_handles:
        session.driver.switch_to.window(handle)
        session.driver.close()
    # quit() ends chromedriver; with debuggerAddress it leaves the runner's engine running.
    session.driver.quit()


async def close(session: Session) -> None:
    await asyncio.to_thread(_stop, session)


def sync_op(fn: Any, with_session: bool = False) -> Any:
    async def op(s: Session, step: dict[str, Any], state: State) -> Any:
        s.driver.set_script_timeout(state.budget.wait(step.get("timeout_ms")))
        s.driver.set_page_load_timeout(state.budget.wait(step.get("timeout_ms")))
        return await asyncio.to_thread(
            _answering, s, fn, s if with_session else s.driver, step, state
        )

    return op


def _answering(s: Session, fn: Any, target: Any, step: dict[str, Any], state: State) -> Any:
    """The op, with the dialogs it meets answered by the task's policy once the task set one
    (an open dialog interrupts a WebDriver command: answer it and run the op again)."""
    while True:
        try:
            value = fn(target, step, state)
        except UnexpectedAlertPresentException:
            if not s.extras.watch_dialogs or not selenium_more.answer_dialog(s):
                raise
            continue
        if s.extras.watch_dialogs:
            selenium_more.answer_dialog(s)
        return value


def _wait(driver: Any, step: dict[str, Any], state: State, condition: Any) -> Any:
    return WebDriverWait(
        driver, state.budget.wait(step.get("timeout_ms")), poll_frequency=0.05
    ).until(condition)


def _element(driver: Any, step: dict[str, Any], state: State) -> Any:
    return _wait(
        driver, step, state, ec.presence_of_element_located((By.CSS_SELECTOR, step["selector"]))
    )


def _new_page(s: Session, step: dict[str, Any], state: State) -> str:
    s.driver.switch_to.new_window("tab")
    s.extras.handles.append(s.driver.current_window_handle)
    return str(s.driver.current_window_handle)


def _click(driver: Any, step: dict[str, Any], state: State) -> str:
    target = _wait(
        driver, step, state, ec.element_to_be_clickable((By.CSS_SELECTOR, step["selector"]))
    )
    for _ in range(step.get("times") or 1):
        target.click()
    return str(step["selector"])


def _fill(driver: Any, step: dict[str, Any], state: State) -> str:
    target = _element(driver, step, state)
    target.clear()
    target.send_keys(step["value"])
    return str(step["value"])


def _set_checked(wanted: bool) -> Any:
    def op(driver: Any, step: dict[str, Any], state: State) -> bool:
        target = _element(driver, step, state)
        if target.is_selected() != wanted:
            target.click()
        return wanted

    return op


def _press(driver: Any, step: dict[str, Any], state: State) -> str:
    key = KEYS.get(step["key"], step["key"])
    target = (
        _element(driver, step, state) if step.get("selector") else driver.switch_to.active_element
    )
    target.send_keys(key)
    return str(step["key"])


def _wait_for_function(driver: Any, step: dict[str, Any], state: State) -> bool:
    _wait(driver, step, state, lambda d: d.execute_script(EVAL, step["expression"]))
    return True


def _wait_for_selector(driver: Any, step: dict[str, Any], state: State) -> bool:
    locator = (By.CSS_SELECTOR, step["selector"])
    visible = step.get("state") == "visible"
    _wait(
        driver,
        step,
        state,
        ec.visibility_of_element_located(locator)
        if visible
        else ec.presence_of_element_located(locator),
    )
    return True


def _history(move: str) -> Any:
    def op(driver: Any, step: dict[str, Any], state: State) -> Any:
        getattr(driver, move)()
        return driver.current_url

    return op


OPS = {
    name: sync_op(fn)
    for name, fn in {
        "goto": lambda d, step, state: (d.get(step["url"]), d.current_url)[1],
        "reload": lambda d, step, state: (d.refresh(), d.current_url)[1],
        "go_back": _history("back"), "go_forward": _history("forward"),
        "evaluate": lambda d, step, state: d.execute_script(EVAL, step["expression"]),
        "wait_for_function": _wait_for_function, "wait_for_selector": _wait_for_selector,
        "click": _click, "fill": _fill, "check": _set_checked(True), "uncheck": _set_checked(False), "press": _press,
        "type": lambda d, step, state: (_element(d, step, state).send_keys(step.get("value", step.get("text", ""))), step.get("value", step.get("text")))[1],
        "focus": lambda d, step, state: (d.execute_script("arguments[0].focus()", _element(d, step, state)), step["selector"])[1],
        "select_option": lambda d, step, state: (Select(_element(d, step, state)).select_by_value(step["value"]), step["value"])[1],
        "count": lambda d, step, state: len(d.find_elements(By.CSS_SELECTOR, step["selector"])),
        "url": lambda d, step, state: d.current_url,
        "title": lambda d, step, state: d.title,
        "user_agent": lambda d, step, state: d.execute_script("return navigator.userAgent"),
    }.items()
}  # fmt: skip
OPS |= {
    name: sync_op(fn, with_session=True)
    for name, fn in {**selenium_more.SYNC_OPS, "new_page": _new_page}.items()
}
OPS |= selenium_more.CDP_OPS | LOCAL_OPS

# new_window("tab") opens its tab in the engine's default context: the one way Selenium has
main(
    Driver(
        f"selenium {selenium.__version__}",
        "selenium",
        connect,
        live_product,
        close,
        OPS,
        isolations=("shared",),
    )
)
