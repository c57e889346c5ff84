"""What the history keeps about a run as a whole, read from its manifest and host summary.

Two layouts are read: ours (``metewand_run_manifest/1``: the store's envelope, settings under
``data``) and the peer benchmark's (its own top-level manifest, or none at all: a directory
with only ``results.jsonl`` counts as a run). A fact a run does not record is NULL, never
guessed: the peer's harness records no git commit, so its runs have none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.runtime import rundir
from metewand.runtime.store import MANIFEST_SCHEMA

OURS, PEER = "metewand", "peer"
HOST_FINGERPRINT_FACTS = ("cpu_model", "cpu_count", "kernel", "arch", "machine", "cgroup")


def _obj(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The manifest as written (``{}`` for a peer directory without one)."""
    raw = rundir.read_json(run_dir / rundir.MANIFEST)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise rundir.RunDirError(f"{run_dir / rundir.MANIFEST}: not a JSON object")
    return raw


def layout_of(manifest: Mapping[str, Any]) -> str:
    return OURS if manifest.get("schema") == MANIFEST_SCHEMA else PEER


def suite_of(manifest: Mapping[str, Any], first_row_keys: set[str]) -> str:
    """``compute`` or ``browser``: the manifest says so; a peer run is a browser run; else the
    rows tell (browser rows name a task and an engine)."""
    suite = _obj(manifest.get("data")).get("suite")
    if suite in ("compute", "browser"):
        return str(suite)
    if layout_of(manifest) == PEER and manifest:
        return "browser"
    return "browser" if {"task_id", "engine"} <= first_row_keys else "compute"


def _host(settings: Mapping[str, Any], summary: Mapping[str, Any]) -> dict[str, Any]:
    """The host facts: the manifest's (``provenance.host_facts``) over the host summary's."""
    host = {**_obj(summary.get("host")), **_obj(settings.get("host"))}
    if "cgroup_layout" in host and "cgroup" not in host:
        host["cgroup"] = host["cgroup_layout"]
    return host


def host_fingerprint(host: Mapping[str, Any]) -> str | None:
    """A short digest of what makes two hosts' figures comparable: CPU model and count, kernel,
    architecture and the cgroup layout (not the hostname: CI machines are interchangeable)."""
    facts = {name: host.get(name) for name in HOST_FINGERPRINT_FACTS if host.get(name) is not None}
    if not facts:
        return None
    return hashlib.sha256(canonical.dumps(facts)).hexdigest()[:16]


def _pollution(summary: Mapping[str, Any]) -> tuple[bool | None, list[str]]:
    """(gate passed, tripped conditions): ours has ``gate``, the peer's a ``polluted`` flag."""
    gate = summary.get("gate")
    if isinstance(gate, Mapping) and isinstance(gate.get("passed"), bool):
        conditions = [
            str(t.get("detail") or t.get("condition"))
            for t in gate.get("triggered") or []
            if isinstance(t, Mapping)
        ]
        return bool(gate["passed"]), conditions
    if isinstance(summary.get("polluted"), bool):
        flags = [str(f) for f in summary.get("flags") or []]
        return not summary["polluted"], flags
    return None, []


def _identities(settings: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Engines (name, version, binary digest), the peer harness, the compute benchmark."""
    out: dict[str, Any] = {}
    engines = settings.get("engines")
    if isinstance(engines, Mapping):
        out["engines"] = {
            str(name): {
                key: pins.get(key)
                for key in ("version", "cdp_product", "binary_sha256", "sha256")
                if isinstance(pins, Mapping) and pins.get(key) is not None
            }
            for name, pins in sorted(engines.items())
        }
    for key in ("benchmark", "manifest_sha256", "adapter_mode", "phase_marks"):
        if settings.get(key) is not None:
            out[key] = settings[key]
    if layout_of(manifest) == PEER and manifest:
        out["peer_harness"] = {
            key: manifest.get(key) for key in ("bench_id", "bench_version", "harness_version")
        }
    return out


def inputs_base(manifest: Mapping[str, Any], suite: str) -> str | None:
    """What a run's groups share of their declared inputs, or None when the run does not say
    (then no group's inputs are known). A compute row names all of its own (its logical
    candidate: dataset, problem and implementation configurations with their source bundles,
    and the policies), so the run adds nothing; a browser row names its task's version, the
    engine binary's digest and the driver's version, and the run adds the corpus's digest (task
    files, fixture pages) and the runner's source tree (the adapters), which change for every
    group at once. The peer's runs record neither."""
    if layout_of(manifest) != OURS:
        return None
    if suite == "compute":
        return "compute"
    settings = _obj(manifest.get("data"))
    corpus = _text(_obj(settings.get("corpus")).get("sha256"))
    source = _text(_obj(_obj(settings.get("runner")).get("source")).get("tree_sha256"))
    if corpus is None or source is None:
        return None
    return f"browser corpus={corpus} runner={source}"


def _tree(settings: Mapping[str, Any]) -> dict[str, Any]:
    tree = _obj(settings.get("benchmarked_tree"))
    return {
        "git_commit": _text(tree.get("commit")),
        "git_branch": _text(tree.get("branch")),
        "git_dirty": tree.get("dirty") if isinstance(tree.get("dirty"), bool) else None,
        "git_commit_time": _text(tree.get("commit_time")),
        "tree_path": _text(tree.get("path")),
    }


def _version(settings: Mapping[str, Any]) -> str | None:
    runner = _obj(settings.get("runner"))
    return _text(settings.get("tool_version")) or _text(runner.get("metewand_version"))


def run_facts(run_dir: Path, manifest: Mapping[str, Any], suite: str) -> dict[str, Any]:
    """The ``runs`` line of one run directory (without its content digest and row count)."""
    summary = _obj(rundir.read_json(run_dir / rundir.HOST_SUMMARY))
    ours = layout_of(manifest) == OURS
    settings = _obj(manifest.get("data")) if ours else dict(manifest)
    host = _host(settings, summary)
    passed, conditions = _pollution(summary)
    run_id = _text(manifest.get("run_id")) or run_dir.name
    started = manifest.get("created_at") if ours else manifest.get("started_at")
    ended = manifest.get("updated_at") if ours else manifest.get("completed_at")
    state = manifest.get("state") if ours else manifest.get("completion_status")
    return {
        "run_id": run_id,
        "suite": suite,
        "layout": OURS if ours else PEER,
        "state": _text(state),
        "started_at": _text(started) or _text(summary.get("started_at")),
        "ended_at": _text(ended) or _text(summary.get("ended_at")),
        "metewand_version": _version(settings) if ours else None,
        **_tree(settings),
        "host_fingerprint": host_fingerprint(host),
        "host": {k: host[k] for k in sorted(host) if k != "cgroup_layout"},
        "identities": _identities(settings, manifest),
        "pollution_passed": passed,
        "pollution": conditions,
        "run_dir": str(run_dir),
    }


def run_uid(facts: Mapping[str, Any], host: Mapping[str, Any]) -> str:
    """A run's identity across stores: its id, its start and the host it ran on. A resumed run
    keeps all three (so its new entry replaces the old one); two machines' runs that happen to
    share an id do not collide."""
    key = "\0".join(
        str(part) for part in (facts["run_id"], facts["started_at"], host.get("hostname"))
    )
    return hashlib.sha256(key.encode()).hexdigest()[:24]
