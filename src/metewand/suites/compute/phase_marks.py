"""Phase marks inside one compute attempt: where its wall, CPU and memory go.

Two ``measure.phases.PhaseClock``s per attempt, one per accounting group: the implementation's
(worker start-up, prepare, the dataset integrity check, execute) and the evaluator's (evaluator
start-up, evaluation). A mark reads only the group's cheap counters (cpu.stat or cpuacct, memory
current, process count, the memory high-water since the previous mark where it can be restarted;
never a PSS scan) through a ``measure.mark_probe`` probe: descriptors opened at ``begin`` and
closed at ``finish``, raw reads at marks, decoded when the record is built, so the two marks
inside the timed envelope cost a few preads each. Each record is ``metewand_phases/1``; the
attempt's pair is ``metewand_attempt_phases/1``, written in the row's own ``phases`` field
beside (never inside) the document's payloads. ``metewand run --no-phase-marks`` turns them off
(the row's ``phases`` is then null).
"""

from __future__ import annotations

from typing import Any

from metewand.measure.mark_probe import MarkProbe, probe_of
from metewand.measure.phases import PhaseClock

SCHEMA = "metewand_attempt_phases/1"
SOURCE = "compute_attempt"
ROLES = ("implementation", "evaluator")


class AttemptPhases:
    """The attempt's clocks; a role without accounting gets no clock (and says why)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._clocks: dict[str, PhaseClock] = {}
        self._probes: dict[str, MarkProbe] = {}
        self._records: dict[str, dict[str, Any]] = {}
        self._missing: dict[str, str] = {}

    def begin(self, role: str, accounting: Any, first: str | None = None) -> None:
        """Start ``role``'s clock on ``accounting`` (a ``TreeAccounting`` or None), then mark
        ``first`` at once when given."""
        if not self.enabled:
            return
        if accounting is None:
            self._missing[role] = "accounting_unavailable"
            return
        probe = self._probes[role] = probe_of(accounting)
        clock = PhaseClock.of_probe(probe, SOURCE)
        clock.begin()
        self._clocks[role] = clock
        if first is not None:
            clock.mark(first)

    def mark(self, role: str, name: str | None) -> None:
        """A boundary of ``role``'s group: ``name`` begins that phase, None ends the current one."""
        clock = self._clocks.get(role)
        if clock is not None and role not in self._records:
            clock.mark(name)

    def finish(self, role: str) -> None:
        """The end reading of ``role`` (before its accounting is released); once."""
        clock = self._clocks.get(role)
        if clock is None or role in self._records:
            return
        try:
            clock.finish()
        finally:
            self._probes.pop(role).close()
        self._records[role] = clock.record()

    def close(self) -> None:
        """Close the descriptors of a role whose clock never finished (an attempt cut short)."""
        for role in list(self._probes):
            self._probes.pop(role).close()

    def to_json(self) -> dict[str, Any] | None:
        """The row's ``phases`` field; None when marks were off for this run."""
        if not self.enabled:
            return None
        out: dict[str, Any] = {"schema": SCHEMA}
        for role in ROLES:
            if role in self._records:
                out[role] = self._records[role]
            else:  # never launched, or launched without an accounting group
                reason = self._missing.get(role, "not_started")
                out[role] = {"status": "unavailable", "reason": reason}
        return out
