"""The identity of what a browser attempt measured: the engine binary and everything that decides
the work it was given.

``compare`` reads an implementation whose code is the same on both sides as unchanged
(``SuiteKind.code_of``): its groups then carry the between-run noise across groups
(``compare.cross_section``) and the host's drift (``compare.controls``). For a compute row that
identity is its implementation configuration. A browser row's "implementation" is its engine, and
what the engine was asked to do is as much a part of its figures as its binary. So the identity
holds, from the run manifest:

- the engine binary's sha256 and its ``--version`` output (a rebuilt or upgraded engine is a
  changed one);
- the task corpus: the row's own task file and every file that is no task's (fixture pages,
  routes, answers: a heavier page is changed work), so an edited task changes that task's
  identity alone (``run_plan.corpus_digest``); a run that recorded only the whole corpus's
  digest takes that, and any edit changes every row;
- metewand's own source tree (it drives raw CDP and passes the engine's launch flags) and the
  driver libraries' pins (the adapters drive the other paths);
- how the run measured (adapter mode, CDP connection, isolation of raw CDP and of driver paths,
  phase marks, resource profile);
- and from the row: its task, driver path and launch profile.

Any of them missing (a run from an older metewand, or the peer's harness) leaves the row without
an identity, and ``compare`` then judges its engine alone, as before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from metewand.compare.run_facts import MISSING, lookup
from metewand.compare.rundir import RunData

# how a run measured: each changes what the engine or its observer does in an attempt
MEASURING = (
    "adapter_mode",
    "cdp_connection",
    "isolation",
    "driver_isolation",
    "phase_marks",
    "resource_profile",
)
ROW_FIELDS = ("task_id", "driver_path", "launch_profile")


def _value(data: Mapping[str, Any], path: str) -> Any:
    value = lookup(data, path)
    return None if value is MISSING else value


def run_facts(run: RunData) -> dict[str, Any] | None:
    """The run-level part of every row's identity; None when the run does not record it all."""
    data = run.manifest
    facts = {
        # the shared part where the run recorded its tasks' own digests (each row adds its
        # task's), else the whole corpus's digest
        "corpus": _value(data, "corpus.shared_sha256") or _value(data, "corpus.sha256"),
        "harness": _value(data, "runner.source.tree_sha256"),
        "drivers": _value(data, "peer_manifest.runner.harness_pins.drivers"),
        # the binary's digest, and what the engine says it is: a wrapper script's digest alone
        # would not change when the engine it starts is upgraded
        "engines": {
            name: [_value(entry, "binary_sha256"), _value(entry, "version_output")]
            for name, entry in (_value(data, "engines") or {}).items()
            if isinstance(entry, Mapping) and _value(entry, "binary_sha256")
        },
        **{name: _value(data, name) for name in MEASURING},
    }
    if not (facts["corpus"] and facts["harness"] and facts["engines"]):
        return None
    return facts


def codes_of(run: RunData) -> Callable[[Mapping[str, Any]], str | None]:
    """Each row's identity (a sha256), or None when the run or the row lacks a part of it. The
    run's part is read once; each row adds its engine and its own fields."""
    facts = run_facts(run)
    if facts is None:
        return lambda row: None
    engines = facts["engines"]
    shared = {k: v for k, v in facts.items() if k != "engines"}
    per_task = _value(run.manifest, "corpus.task_sha256")
    task_files = per_task if isinstance(per_task, Mapping) else None

    def of(row: Mapping[str, Any]) -> str | None:
        engine = row.get("engine")
        binary = engines.get(engine)
        if not binary:
            return None
        whole = {**shared, "engine": engine, "binary": binary}
        whole.update((name, row.get(name)) for name in ROW_FIELDS)
        if task_files is not None:
            whole["task_file"] = task_files.get(row.get("task_id"))
            if not whole["task_file"]:
                return None
        text = json.dumps(whole, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    return of
