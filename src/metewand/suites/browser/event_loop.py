"""The event loop a browser run's slots, fixture servers and cold starts run on.

uvloop (libuv under asyncio's interface) by default: the harness shares the host's cores with
the engine it measures, and each attempt's CDP frames, fixture requests and adapter pipes pass
through this loop. With the same tree alternating between the two loops, uvloop took 6% less
harness CPU per attempt, pooled over six subset x engine x mode cells (0.86-1.04 cell by cell;
benchmarks/README.md, "event_loop_ab.py"). ``METEWAND_EVENT_LOOP=asyncio``
chooses the standard library's loop (an A/B, or a platform uvloop does not support); when uvloop
cannot be imported the standard loop is used and ``describe()`` says why, so a run's manifest
names the loop its figures came from.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Coroutine
from typing import IO, Any, Final, TypeVar

from metewand.errors import InvalidInput

T = TypeVar("T")

ENV_VARIABLE: Final = "METEWAND_EVENT_LOOP"
CHOICES: Final = ("uvloop", "asyncio")


class EventLoopChoiceError(InvalidInput):
    """``METEWAND_EVENT_LOOP`` names no loop metewand knows."""


@functools.cache
def _choice() -> tuple[Callable[[], asyncio.AbstractEventLoop], str]:
    wanted = os.environ.get(ENV_VARIABLE, "") or "uvloop"
    if wanted not in CHOICES:
        raise EventLoopChoiceError(
            f"{ENV_VARIABLE}={wanted!r}: expected one of {', '.join(CHOICES)}"
        )
    if wanted == "asyncio":
        return asyncio.new_event_loop, f"asyncio (chosen by {ENV_VARIABLE})"
    try:
        import uvloop
    except ImportError as exc:
        return asyncio.new_event_loop, f"asyncio (uvloop not importable: {exc})"
    return uvloop.new_event_loop, f"uvloop {uvloop.__version__}"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop of the chosen kind (not set as any thread's current loop)."""
    return _choice()[0]()


def describe() -> str:
    """Which loop runs the harness, and why when it is not the default."""
    return _choice()[1]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a loop of the chosen kind."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


class _LibuvOwned:
    """A pipe end handed to uvloop: its own duplicate of the descriptor, which libuv closes
    when the transport closes. ``close()`` closes nothing. uvloop (0.22 and before,
    MagicStack/uvloop#763) closes the descriptor through libuv and then calls the file object's
    ``close()``, a second close of the same number; by then another thread may have been given
    that number. In a run that was the store's flusher: its directory's descriptor closed under
    its ``fsync`` (EBADF, "results could not be made durable")."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        """libuv closed the descriptor already."""


def _for_loop(loop: asyncio.AbstractEventLoop, pipe: IO[bytes]) -> Any:
    """What to hand the loop's ``connect_*_pipe``: on uvloop a duplicate that libuv alone
    closes, the original closed here (once); on asyncio's loop the file object itself, which
    the transport closes once."""
    if not type(loop).__module__.startswith("uvloop"):
        return pipe
    own = os.dup(pipe.fileno())
    pipe.close()
    return _LibuvOwned(own)


async def connect_read_pipe(
    protocol_factory: Callable[[], asyncio.BaseProtocol], pipe: IO[bytes]
) -> tuple[asyncio.ReadTransport, asyncio.BaseProtocol]:
    """``loop.connect_read_pipe`` on the running loop, its descriptor closed exactly once."""
    loop = asyncio.get_running_loop()
    return await loop.connect_read_pipe(protocol_factory, _for_loop(loop, pipe))


async def connect_write_pipe(
    protocol_factory: Callable[[], asyncio.BaseProtocol], pipe: IO[bytes]
) -> tuple[asyncio.WriteTransport, asyncio.BaseProtocol]:
    """``loop.connect_write_pipe`` on the running loop, its descriptor closed exactly once."""
    loop = asyncio.get_running_loop()
    return await loop.connect_write_pipe(protocol_factory, _for_loop(loop, pipe))
