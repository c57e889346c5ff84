"""Status agreement with the peer's harness, with the disagreements that were examined and kept
(``peer_disagreements.json``: the peer's status is the wrong one there) told apart from any
other, which is a status that changed and must be looked at."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KNOWN_FILE = Path(__file__).with_name("peer_disagreements.json")
FIELDS = ("task_id", "engine", "ours", "peer", "why")


@dataclass
class Agreement:
    """One of our runs against the peer's on one engine."""

    agree: int = 0
    known: list[str] = field(default_factory=list)  # listed, and disagreeing as listed
    unexplained: list[str] = field(default_factory=list)  # "task: ours X, peer Y"
    stale: list[str] = field(default_factory=list)  # listed, but agreeing (or as not listed)

    @property
    def total(self) -> int:
        return self.agree + len(self.known) + len(self.unexplained)

    def brief(self) -> str:
        text = f"{self.agree}/{self.total}"
        if self.known:
            text += f" (+{len(self.known)} known)"
        if self.unexplained:
            text += f" !{len(self.unexplained)} unexplained"
        return text


def load_known(path: Path = KNOWN_FILE) -> dict[tuple[str, str], dict[str, str]]:
    """The listed disagreements by (task_id, engine); a malformed file is refused by name."""
    try:
        entries = json.loads(path.read_text())["disagreements"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{path}: cannot read its 'disagreements' list ({exc})") from exc
    known: dict[tuple[str, str], dict[str, str]] = {}
    for n, entry in enumerate(entries):
        missing = [k for k in FIELDS if not isinstance(entry, dict) or not entry.get(k)]
        if missing:
            raise SystemExit(f"{path}: disagreements[{n}] has no {', '.join(missing)}")
        key = (entry["task_id"], entry["engine"])
        if key in known:
            raise SystemExit(f"{path}: disagreements[{n}] lists {key[0]} on {key[1]} again")
        known[key] = entry
    return known


def compare(
    engine: str,
    ours: dict[str, Any],
    peer: dict[str, Any],
    known: dict[tuple[str, str], dict[str, str]],
) -> Agreement:
    """Each task both runs hold: agreeing, a listed disagreement, or unexplained."""
    out = Agreement()
    for task in sorted(set(ours) & set(peer)):
        listed = known.get((task, engine))
        as_listed = listed is not None and (listed["ours"], listed["peer"]) == (
            ours[task],
            peer[task],
        )
        if ours[task] == peer[task]:
            out.agree += 1
        elif as_listed:
            out.known.append(task)
        else:
            out.unexplained.append(f"{task}: ours {ours[task]}, peer {peer[task]}")
        if listed is not None and not as_listed:
            out.stale.append(f"{task} on {engine}: ours {ours[task]}, peer {peer[task]}")
    return out
