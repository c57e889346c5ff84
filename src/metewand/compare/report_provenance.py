"""The provenance section of report.html: the run manifest's fields, grouped and collapsible.

A browser run's manifest flattens to over a thousand rows (most of them the peer-compatible
manifest); one flat table hides the few a reader looks for. Fields are grouped by what they
describe — the run's settings, the host, the engines, the driver paths, the corpus or datasets,
the harness, the peer-compatible copy — by the patterns below (data, not branches). A field no
pattern names stays in "Run". Each group is an HTML ``<details>`` block; only "Run" starts open.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from metewand.compare.html_parts import details, flatten, paragraph, section, table

RUN_GROUP = "Run"
# (group title, patterns over a field's dotted path); the first group whose pattern matches the
# path or one of its prefixes wins.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Peer-compatible manifest (the peer benchmark's own fields)", ("peer_manifest",)),
    ("Host", ("host", "hosts", "provenance.host", "dask_hosts")),
    ("Driver paths", ("*driver*", "adapter_mode", "config.adapter_mode")),
    (
        "Engines",
        (
            "engines",
            "engine_*",
            "teardown",
            "selected_engines",
            "reuse",
            "cdp_connection",
            "config.engine_paths",
            "config.engines",
        ),
    ),
    (
        "Corpus and datasets",
        (
            "corpus",
            "selection",
            "skipped_invalid_tasks",
            "config.tasks_dir",
            "config.subsets",
            "config.tags",
            "config.task_ids",
            "manifest_*",
            "dataset_materializations",
            "planned_attempts",
            "benchmark",
        ),
    ),
    (
        "Harness (metewand itself)",
        (
            "runner",
            "provenance.runner",
            "harness_*",
            "bench_*",
            "tool_version",
            "versions",
            "executor_sessions",
        ),
    ),
)


def _prefixes(path: str) -> list[str]:
    """``a.b[0].c`` -> ``a``, ``a.b``, ``a.b[0]``, ``a.b[0].c``."""
    return [path[:i] for i, char in enumerate(path) if char in ".[" and i] + [path]


def group_of(path: str) -> str:
    for title, patterns in GROUPS:
        if any(fnmatchcase(prefix, p) for prefix in _prefixes(path) for p in patterns):
            return title
    return RUN_GROUP


def grouped(manifest: Mapping[str, Any]) -> dict[str, list[tuple[str, Any]]]:
    """Group title -> (dotted field, value) rows, "Run" first, the rest in GROUPS order."""
    out: dict[str, list[tuple[str, Any]]] = {RUN_GROUP: []}
    out.update({title: [] for title, _ in GROUPS})
    settings = {k: v for k, v in manifest.items() if k != "tasks"}
    corpus = settings.get("corpus")
    if isinstance(corpus, Mapping) and isinstance(corpus.get("task_sha256"), Mapping):
        # one digest per task (compare.browser_code): a count here, the digests in the manifest
        files = len(corpus["task_sha256"])
        settings["corpus"] = {**corpus, "task_sha256": f"{files} task files (manifest.json)"}
    for path, value in flatten(settings):
        out[group_of(path)].append((path, value))
    order = [
        RUN_GROUP,
        *(title for title, _ in GROUPS if not title.startswith("Peer")),
        GROUPS[0][0],
    ]
    return {title: out[title] for title in order if out[title]}


def provenance_section(manifest: Mapping[str, Any]) -> str:
    groups = grouped(manifest)
    if not groups:
        return section("provenance", "Provenance", paragraph("no run manifest", "muted"))
    blocks = [
        details(
            f"{title} ({len(rows)} fields)", table(["field", "value"], rows), title == RUN_GROUP
        )
        for title, rows in groups.items()
    ]
    return section(
        "provenance",
        "Provenance",
        paragraph("The run manifest's fields, grouped; click a group to open it.", "muted"),
        *blocks,
    )
