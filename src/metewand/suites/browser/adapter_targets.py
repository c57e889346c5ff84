"""Pages an adapter left open in the engine, found and closed after an attempt that broke.

An adapter opens and closes its own pages through its client library. One that crashed, hung
past its deadline or answered garbage was killed before it could close them, and the engine is
reused by the next attempt: its leftover page (and the browser context it made) would run on
beside the next task, costing CPU and memory charged to someone else. So, as the peer's harness
does, the page targets are listed before the adapter starts (``snapshot``) and, after such an
attempt, the page targets that were not there before are closed (``close_new_pages``) and the
row says which (``adapter_cleanup``).

Listing and closing go through a short-lived harness CDP connection opened only while no adapter
runs (an engine may serve one client at a time). Nothing here raises for what the engine does:
an engine that cannot be asked is recorded as such, never as "nothing was left".

A clean attempt leaves the targets as it found them, so the slot carries its list to the next
attempt on the same engine process instead of asking again (``KnownTargets``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Final

from metewand.suites.browser.cdp import CdpClient, CdpDisconnected, CdpError, CdpTimeout

CLEANUP_TIMEOUT_S: Final = 5.0
PAGE_TYPES: Final = frozenset({"page", "tab"})
_FAILURES = (CdpError, CdpTimeout, CdpDisconnected, OSError)


@dataclass(frozen=True)
class TargetSnapshot:
    """The engine's targets and browser contexts before the attempt; ``error`` when unreadable."""

    target_ids: frozenset[str] = frozenset()
    context_ids: frozenset[str] | None = None  # non-default contexts; None: not known
    error: str | None = None


@dataclass
class TargetCleanup:
    """What the sweep after a broken attempt found and did (the row's ``adapter_cleanup``)."""

    targets_before: int | None
    # attempts since the list of targets before was taken (0: just before this attempt)
    snapshot_age_attempts: int = 0
    closed_pages: list[dict[str, Any]] = field(default_factory=list)
    disposed_contexts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "targets_before": self.targets_before,
            "snapshot_age_attempts": self.snapshot_age_attempts,
            "closed_pages": self.closed_pages,
            "disposed_contexts": self.disposed_contexts,
            "errors": self.errors,
        }


async def _targets(client: CdpClient) -> list[dict[str, Any]]:
    found = await client.send("Target.getTargets", {}, timeout=CLEANUP_TIMEOUT_S)
    return [t for t in found.get("targetInfos") or [] if isinstance(t, dict)]


async def _contexts(client: CdpClient) -> frozenset[str] | None:
    """The browser contexts other than the default one; None when the engine cannot say (then
    no context is disposed: the default one must never be)."""
    try:
        found = await client.send("Target.getBrowserContexts", {}, timeout=CLEANUP_TIMEOUT_S)
    except (CdpError, CdpTimeout):
        return None
    return frozenset(str(c) for c in found.get("browserContextIds") or [])


async def snapshot(ws_url: str) -> TargetSnapshot:
    """The targets open before the adapter starts (the connection is closed again before it)."""
    try:
        async with await CdpClient.connect(ws_url, timeout=CLEANUP_TIMEOUT_S) as client:
            # both questions in flight at once: one round trip, one wake-up of this loop
            infos, contexts = await asyncio.gather(_targets(client), _contexts(client))
    except _FAILURES as exc:
        return TargetSnapshot(error=f"Target.getTargets before the attempt: {exc}")
    return TargetSnapshot(frozenset(str(t.get("targetId")) for t in infos), contexts)


async def close_new_pages(ws_url: str, before: TargetSnapshot, age: int = 0) -> TargetCleanup:
    """Close the page targets that appeared since ``before`` (taken ``age`` attempts ago), then
    dispose of the browser contexts made since (``Target.getBrowserContexts`` never lists the
    default one)."""
    cleanup = TargetCleanup(None if before.error else len(before.target_ids), age)
    if before.error is not None:
        # without the snapshot, "new" cannot be told from the engine's own pages: close none
        cleanup.errors.append(before.error)
        return cleanup
    try:
        async with await CdpClient.connect(ws_url, timeout=CLEANUP_TIMEOUT_S) as client:
            await _close(client, before, cleanup)
    except _FAILURES as exc:
        cleanup.errors.append(f"after the attempt: {exc}")
    return cleanup


async def _close(client: CdpClient, before: TargetSnapshot, cleanup: TargetCleanup) -> None:
    for info in await _targets(client):
        target_id = str(info.get("targetId"))
        if info.get("type") not in PAGE_TYPES or target_id in before.target_ids:
            continue
        try:
            await client.send(
                "Target.closeTarget", {"targetId": target_id}, timeout=CLEANUP_TIMEOUT_S
            )
        except (CdpError, CdpTimeout) as exc:
            cleanup.errors.append(f"Target.closeTarget {target_id}: {exc}")
            continue
        cleanup.closed_pages.append({"target_id": target_id, "url": str(info.get("url", ""))})
    now = await _contexts(client)
    if before.context_ids is None or now is None:
        return
    for context in sorted(now - before.context_ids):
        try:
            await client.send(
                "Target.disposeBrowserContext",
                {"browserContextId": context},
                timeout=CLEANUP_TIMEOUT_S,
            )
            cleanup.disposed_contexts.append(context)
        except (CdpError, CdpTimeout) as exc:
            cleanup.errors.append(f"Target.disposeBrowserContext {context}: {exc}")


@dataclass
class KnownTargets:
    """One slot's list of each engine's targets, carried from a clean attempt to the next.

    An adapter whose result says ok had every op answered, its pages' close the last, so the
    engine's targets after it are those it found: asking again before the next attempt costs a
    CDP connection (~1.6 ms of harness CPU, ~0.7 ms of the engine's, ~2.4 ms of wall per attempt
    on Chrome, benchmarks/README.md). The list is carried while attempts on the same engine
    process (its browser websocket) end clean; any other ending, or a new process, asks again.
    A carried list can only lack a page that a clean adapter left open after all: a cleanup after
    a later broken attempt closes that one too, which is what it is for."""

    _carried: dict[str, tuple[str, TargetSnapshot, int]] = field(default_factory=dict)

    def carries(self, engine: str, ws_url: str) -> bool:
        kept = self._carried.get(engine)
        return kept is not None and kept[0] == ws_url

    async def before(self, engine: str, ws_url: str) -> tuple[TargetSnapshot, int]:
        """The targets before this attempt and the attempts since they were listed (0: now)."""
        kept = self._carried.pop(engine, None)
        if kept is not None and kept[0] == ws_url:
            return kept[1], kept[2]
        return await snapshot(ws_url), 0

    def after(
        self, engine: str, ws_url: str, before: TargetSnapshot, age: int, clean: bool
    ) -> None:
        """Carry ``before`` to the engine's next attempt when this one ended clean."""
        if clean and before.error is None:
            self._carried[engine] = (ws_url, before, age + 1)
