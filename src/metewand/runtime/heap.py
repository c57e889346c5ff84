"""The harness's own heap during a run: what start-up left is frozen out of the garbage collector.

CPython's cyclic collector walks every tracked container of a generation it collects. After
start-up that is every module, class and function metewand, aiohttp, jsonschema and the rest
loaded: a full collection of a browser run's harness walked them all in 20-45 ms (measured with
``gc.callbacks`` over 23 raw-CDP attempts: two full collections, 54-80 ms in all), once every few
seconds, wherever it fell: between attempts, or inside one, where the pause is harness CPU beside
the engine under test and lands in the timestamps the harness takes. ``gc.freeze()`` moves every
object alive at that point into the permanent generation, which no collection walks; objects made
later are collected as before. The collection just before it means no garbage of start-up is
frozen with the rest (it is the run's one full walk of the start-up heap).
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Collect once, then leave everything alive now out of every later collection: call it once
    a run has loaded what it runs with and before its attempts begin."""
    gc.collect()
    gc.freeze()
