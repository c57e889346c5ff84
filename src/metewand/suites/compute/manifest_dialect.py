"""Which of the two manifest dialects a parsed ``metewand.toml`` is written in.

metewand reads its own dialect (docs/compute-manifest.md) and the Rust metewand's
(``fixtures/manifest/v1/complete.toml``: ``environments``, ``observation_policies``, datasets
without ``kind`` but with ``output_schema``, problems with a ``contract`` file, implementations
with ``problem_contracts`` and ``capabilities``, versioned policies, implementation and
measurement repetitions). Each dialect has keys the other does not know; the keys found decide,
and a manifest mixing both is refused naming them. A manifest with neither and without
experiments can only be a Rust one (ours requires experiments).
"""

from __future__ import annotations

from typing import Any

from metewand.suites.compute.manifest import METEWAND_DIALECT, RUST_DIALECT

# (section, key) pairs only one dialect has; section "$" is the top level, "experiments" an item.
RUST_KEYS = {
    ("$", "environments"),
    ("$", "observation_policies"),
    ("datasets", "output_schema"),
    ("datasets", "sources"),
    ("datasets", "runner"),
    ("datasets", "environment"),
    ("problems", "contract"),
    ("implementations", "problem_contracts"),
    ("implementations", "capabilities"),
    ("implementations", "sources"),
    ("implementations", "environment"),
    ("execution_policies", "version"),
    ("experiments", "observation_policy"),
    ("experiments", "implementation_repetitions"),
    ("experiments", "measurement_repetitions"),
}
METEWAND_KEYS = {
    ("$", "reference_implementation"),
    ("datasets", "kind"),
    ("problems", "result_schema"),
    ("problems", "metric_schema"),
    ("implementations", "problems"),
    ("implementations", "build"),
    ("implementations", "env"),
    ("implementations", "source_files"),
    ("execution_policies", "jobs"),
    ("experiments", "repetitions"),
}


def _keys_present(document: dict[str, Any]) -> set[tuple[str, str]]:
    found = {("$", key) for key in document}
    for section in ("datasets", "problems", "implementations", "execution_policies"):
        table = document.get(section)
        if isinstance(table, dict):
            for entry in table.values():
                if isinstance(entry, dict):
                    found |= {(section, key) for key in entry}
    experiments = document.get("experiments")
    if isinstance(experiments, list):
        for entry in experiments:
            if isinstance(entry, dict):
                found |= {("experiments", key) for key in entry}
    return found


def _spell(keys: set[tuple[str, str]]) -> str:
    return ", ".join(sorted(k if s == "$" else f"{s}.*.{k}" for s, k in keys))


def detect(document: dict[str, Any]) -> tuple[str, str]:
    """(dialect, why) for a parsed manifest; ValueError naming the keys when it mixes both."""
    found = _keys_present(document)
    rust, ours = found & RUST_KEYS, found & METEWAND_KEYS
    if rust and ours:
        raise ValueError(
            f"mixes the two manifest dialects: Rust metewand keys ({_spell(rust)}) "
            f"beside metewand keys ({_spell(ours)})"
        )
    if rust:
        return RUST_DIALECT, f"Rust metewand keys: {_spell(rust)}"
    if ours:
        return METEWAND_DIALECT, f"metewand keys: {_spell(ours)}"
    if "experiments" not in document:
        return RUST_DIALECT, "no experiments (only the Rust dialect allows none)"
    return METEWAND_DIALECT, "no dialect-specific key (read as metewand's)"
