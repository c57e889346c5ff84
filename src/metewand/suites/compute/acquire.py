"""Acquisition of a local file or directory dataset source, checked by sha256 (no network).

The source is copied into the persistent cache under its derivation id and the *copy* is checked
against the declared digest (a file: sha256 of its bytes; a directory: metewand's tree digest),
so the run uses exactly the bytes that were verified even if the original changes later. A copy
already in the cache is re-verified and reused. Acquisition is timed on its own
(``acquisition_time_ns`` in the receipt) and never counts as materialization: no generator or
transformation runs, so ``materialization_time_ns`` is unavailable ``provided_dataset``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

from metewand import canonical
from metewand.errors import MetewandError
from metewand.measure import forms
from metewand.measure.forms import Reason
from metewand.runtime import rundir
from metewand.suites.compute.manifest_datasets import source_digest
from metewand.suites.compute.plan import DatasetConfig
from metewand.suites.compute.staging import prefix as staging_prefix
from metewand.suites.compute.validate import InvalidOutput, read_document, tree_sha256

RECEIPT_NAME = "receipt.json"
DATA_NAME = "data"


class AcquisitionError(MetewandError):
    """The source is missing, unreadable, or not the declared bytes."""


def acquire_into_cache(root: str, config: DatasetConfig, did: str) -> tuple[str, dict[str, Any]]:
    """(dataset directory, receipt) of the verified copy; raises AcquisitionError."""
    definition = config.definition
    assert definition.path is not None and definition.sha256 is not None
    final = os.path.join(root, did)
    reused = _reuse(final, definition.sha256)
    if reused is not None:
        return reused
    started = time.monotonic_ns()
    staging = tempfile.mkdtemp(prefix=staging_prefix("acquire"), dir=root)
    try:
        copied = _copy(definition.path, os.path.join(staging, DATA_NAME))
        actual = source_digest(copied)
        if actual != definition.sha256:
            raise AcquisitionError(
                f"dataset {definition.name}: {definition.path} has sha256 {actual}, "
                f"not the declared {definition.sha256}"
            )
        elapsed = time.monotonic_ns() - started
        receipt = {
            "schema_version": 1,
            "derivation_id": did,
            "kind": "acquired",
            "origin": "acquired",
            "source_sha256": definition.sha256,
            "output_sha256": tree_sha256(os.path.join(staging, DATA_NAME)),
            "acquisition_time_ns": forms.complete(elapsed).to_json(),
        }
        with open(os.path.join(staging, RECEIPT_NAME), "wb") as fh:
            fh.write(canonical.dumps(receipt))
        rundir.publish_dir(staging, final, replace=False)
    except (OSError, InvalidOutput) as exc:
        raise AcquisitionError(
            f"dataset {definition.name}: cannot acquire {definition.path}: {exc}"
        ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    data = os.path.join(final, DATA_NAME)
    return data, {**receipt, "path": data}


def _copy(source: str, target: str) -> str:
    """Copy a file into ``target``/ or a directory as ``target``; returns what to digest."""
    if os.path.isdir(source):
        shutil.copytree(source, target, symlinks=True)
        return target
    os.mkdir(target)
    copied = os.path.join(target, os.path.basename(source))
    shutil.copyfile(source, copied)
    return copied


def _reuse(final: str, declared: str) -> tuple[str, dict[str, Any]] | None:
    data = os.path.join(final, DATA_NAME)
    try:
        stored = read_document(os.path.join(final, RECEIPT_NAME))
        intact = stored.get("output_sha256") == tree_sha256(data)
    except (InvalidOutput, OSError):
        intact, stored = False, {}
    if intact and stored.get("source_sha256") == declared:
        # Not acquired in this run: the original acquisition duration stays in the cache's
        # receipt, and this run records that it reused the copy.
        receipt = {**stored, "origin": "cache_hit", "path": data}
        receipt["acquisition_time_ns"] = forms.unavailable(Reason.CACHE_HIT).to_json()
        return data, receipt
    if os.path.exists(final):
        shutil.rmtree(final, ignore_errors=True)
    return None
