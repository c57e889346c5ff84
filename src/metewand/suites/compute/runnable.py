"""What of a planned manifest this host cannot run, said before a run exists.

The Rust dialect names things a local metewand can plan but not always run: environments other
than ``local`` (``uv``, ``renv``, ``nix``, ``oci`` — metewand realizes none of them), the ``r``
and ``julia`` runners when their interpreter is missing, pinned remote dataset sources (nothing
is downloaded), timeouts it cannot read as a duration, and ``enforcement = "required"`` for
controls the local executor does not enforce. Each is refused by name, with the reason, before
the run directory is created (``metewand run`` exits 3); ``metewand plan --explain`` lists them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

from metewand.suites.compute.manifest import RUST_DIALECT, Launch, Manifest
from metewand.suites.compute.plan import Plan

ENVIRONMENT_REASONS = {
    "uv": "metewand does not realize uv environments (a uv sync of the project's lockfile); "
    "declare the worker's environment as a local one to run it with the host's software",
    "renv": "metewand does not realize renv environments (an renv restore of the lockfile)",
    "nix": "metewand does not realize Nix flake outputs (no nix build here)",
    "oci": "metewand runs no OCI images (no container runtime is used)",
}
RUNNER_HINTS = {
    "Rscript": "runner 'r' needs Rscript on PATH (Debian: apt-get install r-base-core)",
    "julia": "runner 'julia' needs julia on PATH (Debian ships no julia package: install the "
    "official binaries from julialang.org)",
}
CONTROLS = ("cpus", "threads", "memory")


def planned_launches(manifest: Manifest, plan: Plan) -> dict[str, Launch]:
    """``<key path>`` -> launch, for every worker the planned attempts would start."""
    launches: dict[str, Launch] = {}
    for attempt in plan.attempts:
        impl = manifest.implementations[attempt.implementation]
        launches[f"implementations.{impl.name}"] = impl.launch
        problem = manifest.problems[attempt.problem]
        launches[f"problems.{problem.name}.evaluator"] = problem.evaluator
        dataset = attempt.dataset.definition
        if dataset.materializer is not None:
            launches[f"datasets.{dataset.name}"] = dataset.materializer
    return launches


def refusals(manifest: Manifest, plan: Plan) -> list[str]:
    if manifest.dialect != RUST_DIALECT:
        return []
    file = os.path.basename(manifest.path)
    return [f"{file}: {line}" for line in _refusals(manifest, plan)]


def _refusals(manifest: Manifest, plan: Plan) -> Iterator[str]:
    for where, launch in sorted(planned_launches(manifest, plan).items()):
        env = manifest.environments[launch.environment]
        kind = env.definition["kind"]
        if kind != "local":
            yield (
                f"{where}.environment: environment {env.name!r} ({kind}) cannot run here: "
                f"{ENVIRONMENT_REASONS[kind]}"
            )
        elif launch.runner in ("r", "julia") and shutil.which(launch.argv[0]) is None:
            yield f"{where}.runner: {RUNNER_HINTS[launch.argv[0]]}"
    datasets = {a.dataset.definition.name: a.dataset.definition for a in plan.attempts}
    for name, dataset in sorted(datasets.items()):
        if dataset.remote_source is not None:
            yield (
                f"datasets.{name}.source: the pinned remote source {dataset.remote_source['url']} "
                "is not fetched: this metewand downloads nothing"
            )
    policies = {a.policy.name: a.policy for a in plan.attempts}
    for name, policy in sorted(policies.items()):
        if policy.timeout_text is not None and policy.timeout_s is None:
            yield (
                f"execution_policies.{name}.timeout: {policy.timeout_text!r} is not a duration "
                "metewand can enforce (e.g. '500 ms', '10 s', '10 min', '1 h')"
            )
        requested = [c for c in CONTROLS if getattr(policy, c) is not None]
        if policy.enforcement == "required" and (requested or policy.network is False):
            asked = ", ".join([*requested, "network"])
            yield (
                f"execution_policies.{name}.enforcement: 'required', but the local executor "
                f"enforces none of the requested controls ({asked})"
            )
