"""Resolved records: what actually ran, in the Rust metewand's v1 field sets.

Logical records (``plan``) say what a benchmark asks for; resolved records pin how this host ran
it: the resolved environment (definition id + a fingerprint), the resolved launch (exact program,
arguments, environment variables, working-directory convention), the resolved worker (source
artifact, environment, launch — its id is the ``worker_id`` every hello carries), the executor,
the resolved specification and its observation and attempt slots, and the attempt's identity
(resolved slot + retry index). Host facts enter only resolved records, never logical ones.

Two resource values are ours (the Rust fixtures hold placeholders for them): a source artifact
is ``{"role": "source", "source_bundle": <id>}`` and a dataset artifact ``{"role": "dataset",
"tree_sha256": <metewand tree digest of the dataset directory>}``.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from metewand.suites.compute import identities as ids

PLATFORM = f"{platform.machine()}-{sys.platform}"  # e.g. x86_64-linux, as the Rust fixture
WORKING_DIRECTORY = "private_run_directory"
WIRE_PROTOCOL_VERSION = 1
EXECUTION_SEMANTICS_VERSION = 2  # the document's: adds bounded concurrency


def environment(definition: str) -> str:
    return ids.record(
        "resolved-environment",
        definition=definition,
        fingerprint={"kind": "local", "platform": PLATFORM},
    )


def launch(resolved_environment: str, argv: list[str], variables: dict[str, str]) -> str:
    return ids.record(
        "resolved-launch",
        environment=resolved_environment,
        program=argv[0],
        args=list(argv[1:]),
        environment_variables=dict(variables),
        working_directory=WORKING_DIRECTORY,
    )


def source_artifact(source_bundle: str | None) -> str | None:
    if source_bundle is None:
        return None
    return ids.resource("artifact", {"role": "source", "source_bundle": source_bundle})


def worker(
    source_bundle: str | None, definition_env: str, argv: list[str], variables: dict[str, str]
) -> dict[str, Any]:
    """The resolved worker's fields (also nested in a resolved specification)."""
    env = environment(definition_env)
    return {
        "source_bundle": source_artifact(source_bundle),
        "environment": env,
        "launch": launch(env, argv, variables),
    }


def worker_id(fields: dict[str, Any]) -> str:
    return ids.record("resolved-worker", **fields)


def executor(jobs: int) -> str:
    return ids.record(
        "executor-definition",
        kind="local-process",
        configuration={"capture_output": True, "serial": jobs == 1},
    )


def dataset_artifact(tree_sha256: str) -> str:
    return ids.resource("artifact", {"role": "dataset", "tree_sha256": tree_sha256})
