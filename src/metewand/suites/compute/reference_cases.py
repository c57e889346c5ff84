"""A problem contract's reference cases, run through the problem's own evaluator.

Each case names a dataset (absent for a dataset-free contract), a result directory and the
metrics document the evaluator must write for them. The case's files are copied into a private
directory first (an evaluator must not change the repository, and a changed copy is an error),
the evaluator is launched as in a run (same environment, transport and resolved-worker id) and
asked to ``evaluate`` with the problem's default parameters; its metrics document must satisfy
the contract's metric schema and equal the expected one as canonical JSON.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

from metewand import canonical
from metewand.runtime import rundir
from metewand.suites.compute.launch import launch_spec
from metewand.suites.compute.manifest import Manifest
from metewand.suites.compute.protocol import (
    PhaseTimeout,
    ProtocolViolation,
    WorkerError,
    WorkerGone,
)
from metewand.suites.compute.session import WorkerSession
from metewand.suites.compute.validate import InvalidOutput, read_metrics, tree_sha256

TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CaseResult:
    problem: str
    index: int
    ok: bool
    detail: str


def run_reference_cases(
    manifest: Manifest, definitions: Any, problem: str | None = None
) -> list[CaseResult]:
    results = []
    for name, definition in sorted(manifest.problems.items()):
        if definition.contract is None or (problem is not None and name != problem):
            continue
        for index, case in enumerate(definition.contract.reference_cases):
            try:
                detail = _run_case(manifest, definitions, name, case)
            except (
                OSError,
                InvalidOutput,
                ProtocolViolation,
                PhaseTimeout,
                WorkerGone,
                WorkerError,
            ) as exc:
                detail = f"{type(exc).__name__}: {exc}"
            results.append(CaseResult(name, index, detail is None, detail or "metrics as expected"))
    return results


def _copy(root: str, rel: str, dest: str) -> str:
    source = os.path.join(root, rel)
    if os.path.isdir(source):
        shutil.copytree(source, dest, symlinks=True)
    else:
        os.makedirs(dest)
        shutil.copy2(source, dest)
    return dest


def _run_case(manifest: Manifest, definitions: Any, name: str, case: Any) -> str | None:
    problem = manifest.problems[name]
    with tempfile.TemporaryDirectory(prefix="mw-reference-") as tmp:
        dataset = os.path.join(tmp, "dataset")
        if case.dataset is None:
            os.makedirs(dataset)
        else:
            _copy(manifest.root, case.dataset, dataset)
        result = _copy(manifest.root, case.result, os.path.join(tmp, "result"))
        before = tree_sha256(result)
        metrics_path = os.path.join(tmp, rundir.ATTEMPT_METRICS_DIR, rundir.ATTEMPT_METRICS)
        os.makedirs(os.path.dirname(metrics_path))
        spec = launch_spec(
            "problem_evaluator", problem.evaluator, tmp, tmp, definitions=definitions
        )
        session = WorkerSession(spec, os.path.join(tmp, "logs"))
        try:
            session.start()
            session.hello(TIMEOUT_S)
            session.call(
                "evaluate",
                {
                    "dataset_dir": dataset,
                    "problem_contract_id": definitions.contracts.get(name, name),
                    "problem_parameters": problem.parameter_defaults,
                    "result_dir": result,
                    "metrics_path": metrics_path,
                },
                TIMEOUT_S,
            )
        finally:
            session.shutdown(5.0)
        if tree_sha256(result) != before:
            return "the evaluator changed the reference result"
        got = read_metrics(metrics_path, problem.metric_schema)
        with open(os.path.join(manifest.root, case.expected_metrics), "rb") as fh:
            want = canonical.loads(fh.read())
        if canonical.dumps(got) != canonical.dumps(want):
            return f"metrics {canonical.dumps_str(got)} != expected {canonical.dumps_str(want)}"
    return None
