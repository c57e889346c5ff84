"""Engine order over task-attempts (balanced rotation).

Rotation (``cyclic_task_attempt_seed_offset_v1``, the peer benchmark's algorithm, so orders
are reproducible across both tools): the i-th task-attempt of the run (0-based, in planned
order) runs the canonical engine list rotated left by ``(seed_offset + i) mod E``. Consecutive
task-attempts therefore step through all E rotations in turn, so in ANY window of N consecutive
task-attempts each engine holds each ordinal position ⌊N/E⌋ or ⌈N/E⌉ times. The seed sets
only the offset of the first round: ``seed_offset = first 4 bytes of sha256(seed), big-endian``.

The executor that runs the planned work is in ``runtime.executor``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

ROTATION_ALGORITHM = "cyclic_task_attempt_seed_offset_v1"
ENGINE_ORDER_BALANCED = "balanced_rotation"


def seed_offset(seed: str) -> int:
    """The first round's rotation offset, derived deterministically from the seed string."""
    return int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:4], "big")


def rotate_left(items: Sequence[str], by: int) -> tuple[str, ...]:
    if not items:
        return ()
    k = by % len(items)
    return tuple(items[k:]) + tuple(items[:k])


@dataclass(frozen=True)
class Rotation:
    """Balanced engine order for a run: ``order(i)`` for the i-th task-attempt."""

    engines: tuple[str, ...]
    seed: str

    def __post_init__(self) -> None:
        if not self.engines:
            raise ValueError("rotation needs at least one engine")
        if len(set(self.engines)) != len(self.engines):
            raise ValueError(f"duplicate engines in {self.engines}")

    @property
    def offset(self) -> int:
        return seed_offset(self.seed)

    def order(self, sequence_index: int) -> tuple[str, ...]:
        if sequence_index < 0:
            raise ValueError("sequence_index must be >= 0")
        return rotate_left(self.engines, self.offset + sequence_index)

    def describe(self) -> dict[str, Any]:
        """What the run manifest records about the engine order."""
        return {
            "engine_order": ENGINE_ORDER_BALANCED,
            "engine_order_algorithm": ROTATION_ALGORITHM,
            "engines": list(self.engines),
            "seed_offset_mod_engines": self.offset % len(self.engines),
        }


@dataclass(frozen=True)
class ScheduledAttempt:
    """One engine's slot: the row's ``order`` field is ``{"round": ..., "position": ...}``."""

    task_attempt: Any  # whatever the suite uses to name a task-attempt, e.g. (task_id, attempt)
    engine: str
    round: int  # the task-attempt's sequence index in the run
    position: int  # the engine's ordinal position within that round

    def order_field(self) -> dict[str, int]:
        return {"round": self.round, "position": self.position}


def schedule(rotation: Rotation, task_attempts: Iterable[Any]) -> Iterator[ScheduledAttempt]:
    """Every (task-attempt, engine) slot in execution order."""
    for index, task_attempt in enumerate(task_attempts):
        for position, engine in enumerate(rotation.order(index)):
            yield ScheduledAttempt(task_attempt, engine, index, position)


def position_counts(orders: Iterable[Sequence[str]]) -> Counter[tuple[str, int]]:
    """How often each engine held each ordinal position over ``orders``."""
    counts: Counter[tuple[str, int]] = Counter()
    for order in orders:
        for position, engine in enumerate(order):
            counts[(engine, position)] += 1
    return counts


def max_imbalance(orders: Sequence[Sequence[str]], engines: Sequence[str]) -> int:
    """Largest difference between any two (engine, position) occupancy counts."""
    counts = position_counts(orders)
    values = [counts[(e, p)] for e in engines for p in range(len(engines))]
    return max(values) - min(values) if values else 0
