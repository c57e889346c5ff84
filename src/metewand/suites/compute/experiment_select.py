"""``--experiment NAME``: plan and run only some of a manifest's experiments.

The manifest itself is unchanged (its sha256 still says which benchmark a run is); only the
experiments the plan expands are narrowed. Each experiment's attempt keys and seeded order
depend on that experiment alone, so a selected experiment plans exactly the attempts it plans
in a whole-manifest run, and its rows compare with that run's.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from metewand.suites.compute.manifest import Manifest, ManifestError


def select(manifest: Manifest, names: Sequence[str] | None) -> Manifest:
    """``manifest`` with only the experiments ``names`` (in the manifest's order); None or empty:
    all of them. An unknown name is refused, naming the manifest and the experiments it has."""
    if not names:
        return manifest
    known = [exp.name for exp in manifest.experiments]
    unknown = [name for name in dict.fromkeys(names) if name not in known]
    if unknown:
        where = os.path.basename(manifest.path)
        raise ManifestError(
            [
                f"{where}: --experiment {name}: no such experiment "
                f"(the manifest has: {', '.join(known) or 'none'})"
                for name in unknown
            ]
        )
    wanted = set(names)
    kept = tuple(exp for exp in manifest.experiments if exp.name in wanted)
    return dataclasses.replace(manifest, experiments=kept)


def recorded(names: Sequence[str] | None) -> list[str] | None:
    """What a run's manifest records: the selected names, sorted and unique; None for all."""
    return sorted(set(names)) if names else None
