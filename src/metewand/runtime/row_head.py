"""The head every result row starts with, whatever its suite: one typed place for the shared fields.

A row in ``results.jsonl`` is the head plus the suite's own fields (a compute attempt record, a
browser task attempt). The head names the attempt (``key``, unique in the run), says how it
ended (``status``, in the suite's vocabulary), which try or repetition it was (``attempt``) and
where its files are (``artifacts``). ``run_id`` and the times are optional because compute rows
keep them elsewhere (the manifest, ``record.started_at``): an optional field left ``None`` is not
written, so each suite's rows keep their documented bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RowHead:
    key: str
    status: str  # compute: accepted | failed; browser: pass | fail | ... | infra
    attempt: int  # compute: the retry index from 0; browser: the repetition from 1 (the peer's)
    artifacts: str | list[str]  # compute: the attempt's directory; browser: its files
    run_id: str | None = None
    started_at: str | None = None  # UTC, ISO 8601
    finished_at: str | None = None

    def fields(self) -> dict[str, Any]:
        """The head as row fields (optional ones only when set)."""
        head: dict[str, Any] = {
            "key": self.key,
            "status": self.status,
            "attempt": self.attempt,
            "artifacts": self.artifacts,
        }
        optional = {
            "run_id": self.run_id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }
        head.update({name: value for name, value in optional.items() if value is not None})
        return head
