"""The engine's cookies and site storage, cleared by the harness after a driver-path attempt whose
pages were in the engine's default context.

An adapter asked for ``context`` isolation opens the attempt's pages in a browser context of
their own and disposes of it: nothing passes to the next attempt. Some libraries can only open
pages in the default context (Selenium, Stagehand, agent-browser), and ``--driver-isolation
cleared`` asks every adapter for the default context on purpose: on Chrome a new context's first
page starts a renderer, while a default-context page gets Chrome's spare one (docs/driver-ops.md).
Either way the attempt's cookies and storage would reach the next attempt. So, inside the
attempt's duration (its ``state_clear`` phase), as a context's disposal is, the harness:

- removes every cookie of the default context (``Storage.clearCookies``, browser-wide);
- clears the fixture origins' site storage (``Storage.clearDataForOrigin``: local storage,
  IndexedDB, Cache Storage, service workers, file systems), on a session attached to a page of
  the default context (Chrome answers "Internal error" without one);
- empties the HTTP cache (``Network.clearBrowserCache``).

The fixture origins are the fixture server's, under both names a task uses (``127.0.0.1`` and
its ``localhost`` alias); the engines cannot reach any other host. What is left shared: the
network context's open connections and DNS cache, permissions a task granted, the back-forward
cache of pages already closed. Measured on Chrome here: 10-35 ms of wall per clear, against
~65 ms for a new context's renderer start plus 10-40 ms for its disposal (docs/performance.md).

An engine whose state lives and dies with each CDP connection (Lightpanda: ``EngineSpec.
state_per_connection``) has nothing to clear after an adapter that connected for its attempt;
that is recorded, not done. Nothing here raises for what the engine does: a clear that failed
says which command failed, and the row's isolation then stays the adapter's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from metewand.suites.browser.cdp import CdpClient, CdpDisconnected, CdpError, CdpTimeout

CLEAR_TIMEOUT_S: Final = 10.0
# a kept session's commands answer in 1-15 ms here; one unanswered this long is taken for a
# page that went away under it, and the clear is done again through another page
KEPT_TIMEOUT_S: Final = 1.0
# Every kind of site storage a page can write. Not "all": that adds Chrome's GPU shader cache
# (no GPU here, and nothing a page can read back) and took 4-14 ms of wall per origin against
# 0.3-1 ms for each kind below; cookies are cleared browser-wide beside it.
STORAGE_TYPES: Final = "local_storage,indexeddb,cache_storage,service_workers,file_systems"
# the names a task reaches the fixture server by (the engines resolve no other host)
LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost")
_FAILURES = (CdpError, CdpTimeout, CdpDisconnected, OSError)


@dataclass
class StateClear:
    """What was done after the attempt (the row's ``state_clear``)."""

    by: str  # "harness": cleared here; "engine": the engine's state is per connection
    origins: tuple[str, ...] = ()
    wall_ms: float | None = None
    made_page: bool = False  # no default-context page was open: one was made to clear through
    # "kept": through the slot's open connection to the engine process; "opened": one made now
    connection: str | None = None
    errors: list[str] = field(default_factory=list)
    note: str | None = None

    @property
    def cleared(self) -> bool:
        return self.by == "harness" and not self.errors

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"by": self.by, "errors": self.errors}
        if self.by == "harness":
            record.update(
                cookies="all",
                origins=list(self.origins),
                storage_types=STORAGE_TYPES,
                http_cache=True,
                wall_ms=self.wall_ms,
                made_page=self.made_page,
                connection=self.connection,
            )
        if self.note is not None:
            record["note"] = self.note
        return record


def fixture_origins(base_url: str) -> tuple[str, ...]:
    """The fixture server's origin under each loopback name it is reached by."""
    parts = urlsplit(base_url)
    if parts.hostname not in LOOPBACK_NAMES or parts.port is None:
        return (f"{parts.scheme}://{parts.netloc}",)
    return tuple(f"{parts.scheme}://{name}:{parts.port}" for name in LOOPBACK_NAMES)


def per_connection(engine: str) -> StateClear:
    """The record for an engine that starts each CDP connection with empty state."""
    return StateClear(
        by="engine",
        note=f"{engine} starts each CDP connection with no cookies or storage: "
        "nothing is cleared by the harness",
    )


async def clear_state(ws_url: str, origins: tuple[str, ...]) -> StateClear:
    """Clear the default context's cookies, ``origins``' storage and the HTTP cache through a
    short-lived connection to the engine's browser endpoint."""
    record = StateClear(by="harness", origins=origins, connection="opened")
    started = time.perf_counter()
    try:
        async with await CdpClient.connect(ws_url, timeout=CLEAR_TIMEOUT_S) as client:
            await _clear(client, origins, record)
    except _FAILURES as exc:  # the connection, or the page to clear through
        record.errors.append(str(exc))
    record.wall_ms = round((time.perf_counter() - started) * 1000, 3)
    return record


class KeptClears:
    """One slot's connection to each engine process it clears, with a session on a default-
    context page, kept from one clear to the next. Only for an engine that serves many CDP
    clients at once (``EngineSpec.serves_many_clients``: Chrome), where an idle connection beside
    the adapter's costs the engine nothing (no domain is enabled on it: no events). Each clear is
    then one round of four commands: 0.8 ms of the harness's CPU and 6.4 ms of wall, against 1.9
    and 8.6 ms with a connection and an attach of its own (docs/performance.md)."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[CdpClient, str | None]] = {}  # browser endpoint -> kept

    async def clear(self, ws_url: str, origins: tuple[str, ...]) -> StateClear:
        record = StateClear(by="harness", origins=origins, connection="kept")
        started = time.perf_counter()
        client, session = self._open.pop(ws_url, (None, None))
        try:
            if client is None or not client.is_connected:
                await self._forget_closed(client)
                client = await CdpClient.connect(ws_url, timeout=CLEAR_TIMEOUT_S)
                session, record.connection = None, "opened"
            self._open[ws_url] = (client, await _clear(client, origins, record, session))
        except _FAILURES as exc:
            record.errors.append(str(exc))
            await _closed(client)
        except BaseException:  # cancelled mid-clear: what its session has in flight is unknown
            await _closed(client)
            raise
        record.wall_ms = round((time.perf_counter() - started) * 1000, 3)
        return record

    async def close(self) -> None:
        """Close every kept connection (the slot is done)."""
        kept, self._open = self._open, {}
        for client, _session in kept.values():
            await _closed(client)

    async def _forget_closed(self, client: CdpClient | None) -> None:
        """Drop the given connection and any other whose engine process has gone."""
        await _closed(client)
        for url, (other, _session) in list(self._open.items()):
            if not other.is_connected:
                del self._open[url]
                await _closed(other)


async def _closed(client: CdpClient | None) -> None:
    if client is not None:
        with contextlib.suppress(Exception):  # closing what may be broken already
            await client.close()


async def _clear(
    client: CdpClient, origins: tuple[str, ...], record: StateClear, session: str | None = None
) -> str:
    """Clear through ``client``; ``session``: one already attached to a default-context page.
    Returns the session used."""
    if session is not None and not _detached(client, session):
        outcomes = await asyncio.gather(
            _attempt(client, "Storage.clearCookies", {}),
            *_session_calls(client, origins, session, KEPT_TIMEOUT_S),
        )
        failed = [outcome for outcome in outcomes if outcome is not None]
        if not failed:
            return session
        # its page may have gone while the commands were on their way (closing, it still
        # took them, then dropped them unanswered): attach to another page, clear again
    # the cookies go while a page to clear the rest through is found
    cookies, attached = await asyncio.gather(
        _attempt(client, "Storage.clearCookies", {}),
        _attached_page(client, record),
        return_exceptions=True,
    )
    if isinstance(cookies, BaseException):
        record.errors.append(f"Storage.clearCookies: {cookies}")
    elif cookies is not None:
        record.errors.append(cookies)
    if isinstance(attached, BaseException):
        raise attached
    outcomes = await asyncio.gather(*_session_calls(client, origins, attached))
    record.errors.extend(outcome for outcome in outcomes if outcome is not None)
    return attached


def _detached(client: CdpClient, session: str) -> bool:
    """Whether the engine said the session's page has gone (Chrome leaves a command sent on such
    a session unanswered: it would wait out its timeout)."""
    return any(
        event.get("method") == "Target.detachedFromTarget"
        and (event.get("params") or {}).get("sessionId") == session
        for event in client.events(None)
    )


def _session_calls(
    client: CdpClient,
    origins: tuple[str, ...],
    session: str,
    timeout: float = CLEAR_TIMEOUT_S,
) -> list[Coroutine[Any, Any, str | None]]:
    """Each origin's storage and the HTTP cache, on the page session."""
    calls = [
        _attempt(
            client,
            "Storage.clearDataForOrigin",
            {"origin": origin, "storageTypes": STORAGE_TYPES},
            session,
            timeout,
        )
        for origin in origins
    ]
    calls.append(_attempt(client, "Network.clearBrowserCache", {}, session, timeout))
    return calls


async def _attached_page(client: CdpClient, record: StateClear) -> str:
    """A session on a default-context page, listed now (made when there is none). A kept
    connection keeps the session, so this runs once per engine process there."""
    targets, contexts = await asyncio.gather(
        client.send("Target.getTargets", {}, timeout=CLEAR_TIMEOUT_S),
        client.send("Target.getBrowserContexts", {}, timeout=CLEAR_TIMEOUT_S),
    )
    page = _default_context_page(targets, contexts)
    if page is None:
        made = await client.send("Target.createTarget", {"url": "about:blank"})
        page, record.made_page = str(made.get("targetId")), True
    attached = await client.send(
        "Target.attachToTarget", {"targetId": page, "flatten": True}, timeout=CLEAR_TIMEOUT_S
    )
    return str(attached.get("sessionId"))


async def _attempt(
    client: CdpClient,
    method: str,
    params: dict[str, Any],
    session: str | None = None,
    timeout: float = CLEAR_TIMEOUT_S,
) -> str | None:
    """None when the engine did it, else what it said."""
    try:
        await client.send(method, params, session_id=session, timeout=timeout)
    except (CdpError, CdpTimeout) as exc:
        origin = params.get("origin")
        return f"{method}{f' {origin}' if origin else ''}: {exc}"
    return None


def _default_context_page(targets: dict[str, Any], contexts: dict[str, Any]) -> str | None:
    """A page of the default context (``Target.getBrowserContexts`` lists only the others)."""
    others = {str(c) for c in contexts.get("browserContextIds") or []}
    for info in targets.get("targetInfos") or []:
        if not isinstance(info, dict) or info.get("type") != "page":
            continue
        if str(info.get("browserContextId")) not in others:
            return str(info.get("targetId"))
    return None
