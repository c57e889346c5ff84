"""Dataset materialization: each configuration built once per run, kept in a persistent
content-addressed cache, shared by every dependent attempt.

Only the ``materialize`` request through its complete response is timed: materializer startup,
validation and cache publication are outside. A later run that reuses the cache records
``materialization_time_ns`` unavailable with ``cache_hit``; its receipt keeps the original
construction duration and time. Fixed and unit datasets are ``provided_dataset``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metewand import canonical
from metewand.errors import MetewandError
from metewand.measure import forms
from metewand.measure.clock import utc_now
from metewand.measure.forms import Measurement, Reason
from metewand.runtime import rundir
from metewand.suites.compute import staging as cache_staging
from metewand.suites.compute.acquire import AcquisitionError, acquire_into_cache
from metewand.suites.compute.launch import Builder, launch_spec
from metewand.suites.compute.plan import DatasetConfig
from metewand.suites.compute.protocol import (
    PhaseTimeout,
    ProtocolViolation,
    WorkerError,
    WorkerGone,
)
from metewand.suites.compute.session import WorkerSession
from metewand.suites.compute.validate import (
    InvalidOutput,
    check_manifest_tree,
    check_schema,
    read_document,
    safe_relative,
    tree_files,
    tree_sha256,
)
from metewand.suites.compute.workers import Containment

RECEIPT_NAME = "receipt.json"
DATA_NAME = "data"
HELLO_TIMEOUT_S = 30.0
MATERIALIZE_TIMEOUT_S = 600.0


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "metewand")


@dataclass(frozen=True)
class MaterializedDataset:
    config: DatasetConfig
    derivation_id: str
    directory: str | None  # None when materialization failed
    measurement: Measurement  # materialization_time_ns as this run sees it
    receipt: dict[str, Any]
    error: str | None = None


def derivation_id(config: DatasetConfig) -> str:
    return canonical.identity(
        "dataset-derivation", {"version": 1, "configuration": config.identity}
    )


class DatasetCache:
    """Per-run, thread-safe front of the persistent cache."""

    def __init__(
        self,
        cache_dir: str,
        work_dir: str,
        builder: Builder,
        on_start: Callable[[WorkerSession], None] | None = None,
        containment: Containment | None = None,
        definitions: Any = None,
        root_dir: str = "",
    ) -> None:
        self.definitions = definitions  # gives each materializer its resolved-worker id
        self.root_dir = root_dir  # the manifest's directory: fixed datasets' sources live there
        self.on_start = on_start  # told of every materializer process (the run may kill it)
        self.containment = containment or Containment()  # each materializer in its own group
        self.root = os.path.join(cache_dir, "datasets")
        self.work_dir = work_dir
        self.builder = builder
        self._results: dict[str, MaterializedDataset] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        os.makedirs(self.root, exist_ok=True)
        cache_staging.remove_stale(self.root)  # left by a killed run

    def get(self, config: DatasetConfig) -> MaterializedDataset:
        with self._guard:
            lock = self._locks.setdefault(config.identity, threading.Lock())
        with lock:
            if config.identity not in self._results:
                self._results[config.identity] = self._materialize(config)
            return self._results[config.identity]

    def receipts(self) -> list[dict[str, Any]]:
        with self._guard:
            return [m.receipt for m in self._results.values()]

    def _materialize(self, config: DatasetConfig) -> MaterializedDataset:
        did = derivation_id(config)
        kind = config.definition.kind
        if kind in ("fixed", "unit"):
            return self._provided(config, did)
        if kind == "acquired":
            return self._acquire(config, did)
        source = None
        if kind == "transformed":
            assert config.source is not None
            source = self.get(config.source)  # acquisition or construction: not timed here
            if source.directory is None:
                receipt = _receipt_head(did, config, source) | {"origin": "constructed"}
                error = f"source dataset {config.source.name} failed: {source.error}"
                return MaterializedDataset(
                    config, did, None, forms.unavailable(Reason.NOT_STARTED), receipt, error
                )
        final = os.path.join(self.root, did)
        hit = self._reuse(config, did, final)
        if hit is not None:
            return hit
        return self._construct(config, did, final, source)

    def _provided(self, config: DatasetConfig, did: str) -> MaterializedDataset:
        if config.definition.source_patterns is not None:  # Rust dialect: a source bundle
            directory = os.path.join(self.work_dir, "fixed", did.rsplit("-", 1)[-1][:16])
            if not os.path.isdir(directory):
                from metewand.suites.compute.source_bundle import SourceBundleError, copy_bundle

                try:
                    copy_bundle(self.root_dir, config.definition.source_patterns, directory)
                except (SourceBundleError, OSError) as exc:
                    error = f"dataset {config.definition.name}: its sources: {exc}"
                    receipt = {"schema_version": 1, "derivation_id": did, "kind": "fixed"}
                    receipt["origin"] = "provided"
                    provided = forms.unavailable(Reason.PROVIDED_DATASET)
                    return MaterializedDataset(config, did, None, provided, receipt, error)
        elif config.definition.kind == "fixed":
            directory = str(config.definition.path)
        else:
            directory = os.path.join(self.work_dir, "unit-dataset")
            os.makedirs(directory, exist_ok=True)
        receipt = {
            "schema_version": 1,
            "derivation_id": did,
            "kind": config.definition.kind,
            "origin": "provided",
            "path": directory,
        }
        provided = forms.unavailable(Reason.PROVIDED_DATASET)
        try:
            receipt["output_sha256"] = tree_sha256(directory)
        except (InvalidOutput, OSError) as exc:  # changed since validation: its attempts fail
            error = f"dataset {config.definition.name}: {directory}: {exc}"
            return MaterializedDataset(config, did, None, provided, receipt, error)
        return MaterializedDataset(config, did, directory, provided, receipt)

    def _acquire(self, config: DatasetConfig, did: str) -> MaterializedDataset:
        # No generator or transformation runs: materialization is provided_dataset; the
        # acquisition's own duration is in the receipt, outside materialization_time_ns.
        provided = forms.unavailable(Reason.PROVIDED_DATASET)
        try:
            directory, receipt = acquire_into_cache(self.root, config, did)
        except AcquisitionError as exc:
            receipt = {"schema_version": 1, "derivation_id": did, "kind": "acquired"}
            receipt["origin"] = "acquired"
            return MaterializedDataset(config, did, None, provided, receipt, str(exc))
        return MaterializedDataset(config, did, directory, provided, receipt)

    def _reuse(self, config: DatasetConfig, did: str, final: str) -> MaterializedDataset | None:
        try:
            stored = read_document(os.path.join(final, RECEIPT_NAME))
            data = os.path.join(final, DATA_NAME)
            if stored.get("output_sha256") != tree_sha256(data):
                raise InvalidOutput("cached dataset changed since construction")
        except (InvalidOutput, OSError):
            if os.path.exists(final):
                _quarantine(final, self.root)
            return None
        receipt = {**stored, "origin": "cache_hit", "path": data}
        return MaterializedDataset(config, did, data, forms.unavailable(Reason.CACHE_HIT), receipt)

    def _construct(
        self,
        config: DatasetConfig,
        did: str,
        final: str,
        source: MaterializedDataset | None = None,
    ) -> MaterializedDataset:
        staging = tempfile.mkdtemp(prefix=cache_staging.prefix("staging"), dir=self.root)
        data = os.path.join(staging, DATA_NAME)
        os.mkdir(data)
        head = _receipt_head(did, config, source)
        try:
            elapsed, constructed_at = self._run_materializer(config, data, staging, source)
            output = tree_sha256(data)
        except _MaterializeError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            receipt = {**head, "origin": "constructed"}
            if exc.measurement.value is not None:  # the request ran; its output was refused
                receipt["materialization_time_ns"] = exc.measurement.to_json()
            return MaterializedDataset(config, did, None, exc.measurement, receipt, str(exc))
        receipt = {
            **head,
            "origin": "constructed",
            "output_sha256": output,
            "materialization_time_ns": forms.complete(elapsed).to_json(),
            "constructed_at": constructed_at,
        }
        _write(os.path.join(staging, RECEIPT_NAME), receipt)
        rundir.publish_dir(staging, final, replace=False)
        path = os.path.join(final, DATA_NAME)
        return MaterializedDataset(
            config, did, path, forms.complete(elapsed), {**receipt, "path": path}
        )

    def _run_materializer(
        self,
        config: DatasetConfig,
        out: str,
        staging: str,
        source: MaterializedDataset | None,
    ) -> tuple[int, str]:
        """Time the generator's ``materialize`` or the transformer's ``transform`` request
        through its complete response; startup, validation and publication stay outside."""
        definition = config.definition
        assert definition.materializer is not None
        built = self.builder.build(f"dataset-{definition.name}", definition.materializer)
        if built.error:
            raise _MaterializeError(built.error, forms.unavailable(Reason.NOT_STARTED))
        role, method, request = _request(config, out, staging, source)
        role_name = "transformer" if source is not None else "materializer"
        spec = launch_spec(
            role, definition.materializer, staging, built.build_dir, definitions=self.definitions
        )
        accounting = self.containment.open(f"gen-{definition.name}"[:24], measuring=False)[0]
        session = WorkerSession(
            spec,
            os.path.join(staging, "logs"),
            accounting=accounting,
            on_start=self.on_start,
            owns_accounting=True,
        )
        started = elapsed = None
        try:
            session.start()
            session.hello(HELLO_TIMEOUT_S)
            constructed_at = utc_now()
            started = time.monotonic_ns()
            reply = session.call(method, request, MATERIALIZE_TIMEOUT_S)
            elapsed = time.monotonic_ns() - started
            _check_dataset(out, reply, definition.output_schema)  # outside the measured request
            _check_source_unchanged(source)
            return elapsed, constructed_at
        except (OSError, ProtocolViolation, PhaseTimeout, WorkerGone, WorkerError) as exc:
            measured = (
                forms.partial(time.monotonic_ns() - started, Reason.INTERRUPTED)
                if started is not None
                else forms.unavailable(Reason.NOT_STARTED)
            )
            raise _MaterializeError(f"{role_name} {definition.name}: {exc}", measured) from exc
        except InvalidOutput as exc:
            # The request ran through its complete response; only its output is refused.
            assert elapsed is not None
            raise _MaterializeError(
                f"{role_name} {definition.name}: invalid dataset: {exc}", forms.complete(elapsed)
            ) from exc
        finally:
            session.shutdown(5.0)
            shutil.rmtree(os.path.join(staging, "logs"), ignore_errors=True)


class _MaterializeError(MetewandError):
    def __init__(self, message: str, measurement: Measurement) -> None:
        super().__init__(message)
        self.measurement = measurement


def _request(
    config: DatasetConfig, out: str, staging: str, source: MaterializedDataset | None
) -> tuple[str, str, dict[str, Any]]:
    """(worker role, method, request) for a generator or a transformer."""
    request = {
        "dataset_parameters": config.parameters,
        "dataset_seed": config.seed,
        "output_dir": out,
    }
    if source is None:
        return "dataset_materializer", "materialize", {"source_dir": staging, **request}
    return "dataset_transformer", "transform", {"source_dataset_dir": source.directory, **request}


def _receipt_head(
    did: str, config: DatasetConfig, source: MaterializedDataset | None
) -> dict[str, Any]:
    head = {"schema_version": 1, "derivation_id": did, "kind": config.definition.kind}
    if source is not None:
        head["source_derivation_id"] = source.derivation_id
    return head


def _check_source_unchanged(source: MaterializedDataset | None) -> None:
    if source is None or source.directory is None:
        return
    if tree_sha256(source.directory) != source.receipt.get("output_sha256"):
        raise InvalidOutput(f"the transformer modified its source dataset {source.config.name}")


def _check_dataset(out: str, reply: dict[str, Any], output_schema: Any = None) -> None:
    dataset = reply.get("dataset")
    if not isinstance(dataset, dict):
        raise InvalidOutput("materialize reply has no dataset object")
    rel = safe_relative(dataset.get("manifest"))
    tree_files(out)  # no symlink or special file anywhere, before reading through a path
    doc = read_document(os.path.join(out, rel))
    if doc.get("complete") is not True:
        raise InvalidOutput("dataset manifest must say complete: true")
    check_manifest_tree(out, rel, doc)
    check_schema(output_schema, doc, "dataset manifest")  # Rust dialect: the output schema


def _write(path: str, value: Any) -> None:
    with open(path, "wb") as fh:
        fh.write(canonical.dumps(value))
        fh.flush()
        os.fsync(fh.fileno())


def _quarantine(path: str, root: str) -> None:
    target = tempfile.mkdtemp(prefix="quarantine-", dir=root)
    os.rename(path, os.path.join(target, "object"))
