"""Python worker SDK: the worker side of the compute protocol, version 1.

A worker reads newline-delimited canonical JSON requests from the descriptor named by
``METEWAND_PROTOCOL_READ_FD`` and writes one response line per request to
``METEWAND_PROTOCOL_WRITE_FD``. stdout and stderr stay free for the user's own output.

An implementation is a few lines::

    from metewand.worker import Implementation

    impl = Implementation()

    @impl.prepare
    def load(request):            # request: the prepare fields (dataset_dir, parameters, seed)
        return read_input(request["dataset_dir"])

    @impl.execute
    def run(state, result_dir):    # returns the result data (a JSON object)
        return {"answer": solve(state)}

    impl.serve()

Materializers (``Materializer().materialize``), transformers (``Transformer().transform``) and
evaluators (``Evaluator().evaluate``) look the same. This module imports only the standard
library and ``metewand.canonical`` because it starts inside every worker and its import time is
charged to worker startup.
"""

from __future__ import annotations

import hashlib  # at start-up, not inside a materializer's first manifest
import os
import sys
import time

from metewand import canonical

# Only the type checker reads these: typing and collections.abc cost a worker ~10 ms of start-up
# (measured with -X importtime), which every attempt would pay.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Handler = Callable[[dict[str, Any]], dict[str, Any] | None]

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 1_048_576
READ_FD_ENV = "METEWAND_PROTOCOL_READ_FD"
WRITE_FD_ENV = "METEWAND_PROTOCOL_WRITE_FD"
SDK = {"name": "metewand-python", "version": "1"}
RESULT_MANIFEST = "result-manifest.json"
DATASET_MANIFEST = "dataset-manifest.json"

# The four worker error codes of protocol version 1.
INVALID_REQUEST = "invalid_request"
UNSUPPORTED_OPERATION = "unsupported_operation"
OPERATION_FAILED = "operation_failed"
INTERNAL_ERROR = "internal_error"


class WorkerFailure(Exception):
    """Raise from a handler to answer with a specific error code and details."""

    def __init__(self, message: str, code: str = OPERATION_FAILED, details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.details = details


def file_entries(root: str, exclude: str, digests: bool = True) -> list[dict[str, Any]]:
    """Artifact-manifest entries for every regular file under ``root`` except ``exclude``;
    ``digests=False`` leaves out each file's sha256 (an optional field)."""
    entries = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel == exclude:
                continue
            entry = {
                "path": rel,
                "size_bytes": os.path.getsize(full),
                "media_type": "application/octet-stream",
            }
            if digests:
                entry["sha256"] = _sha256(full)
            entries.append(entry)
    return sorted(entries, key=lambda e: e["path"].encode("utf-8"))


def _sha256(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def write_document(path: str, document: Any, durable: bool = True) -> None:
    """Write canonical JSON; ``durable``: on the disk before the response says it exists."""
    with open(path, "wb") as fh:
        fh.write(canonical.dumps(document))
        if durable:
            fh.flush()
            os.fsync(fh.fileno())


class Worker:
    """Dispatch loop for one role. Subclasses register the role's methods."""

    role = ""

    def __init__(self, capabilities: tuple[str, ...] = ()) -> None:
        self.capabilities = list(capabilities)
        self._handlers: dict[str, Handler] = {}

    def handle(self, method: str, handler: Handler) -> None:
        self._handlers[method] = handler

    def serve(self) -> int:
        """Answer requests until shutdown or end of input; returns the exit status."""
        try:
            read_fd = int(os.environ[READ_FD_ENV])
            write_fd = int(os.environ[WRITE_FD_ENV])
        except (KeyError, ValueError):
            print("metewand worker: protocol descriptors not set", file=sys.stderr)
            return 2
        reader = os.fdopen(read_fd, "rb", buffering=0)
        stream = _LineStream(reader)
        while True:
            raw = stream.next_line()
            if raw is None:
                return 0
            request = _parse(raw)
            if request is None:
                _send(write_fd, _error("", INVALID_REQUEST, "request is not a JSON object"))
                continue
            response = self._dispatch(request)
            _send(write_fd, response)
            if request.get("method") == "shutdown":
                return 0

    def _dispatch(self, request: dict[str, Any]) -> dict[str, Any]:
        rid = request.get("id")
        if not isinstance(rid, str) or not rid:
            return _error("", INVALID_REQUEST, "request id must be a nonempty string")
        method = request.get("method")
        if method == "hello":
            return self._hello(rid, request)
        if method == "shutdown":
            return {"id": rid, "ok": True}
        handler = self._handlers.get(str(method))
        if handler is None:
            return _error(rid, UNSUPPORTED_OPERATION, f"{self.role} does not handle {method!r}")
        try:
            reply = handler(request) or {}
        except WorkerFailure as exc:
            return _error(rid, exc.code, str(exc) or exc.code, exc.details)
        except Exception as exc:  # the worker reports the failure instead of dying
            return _error(rid, OPERATION_FAILED, f"{type(exc).__name__}: {exc}")
        return {"id": rid, "ok": True, **reply}

    def _hello(self, rid: str, request: dict[str, Any]) -> dict[str, Any]:
        offered = request.get("protocols")
        if not isinstance(offered, list) or PROTOCOL_VERSION not in offered:
            return _error(rid, INVALID_REQUEST, f"protocol {PROTOCOL_VERSION} not offered")
        if request.get("role") != self.role:
            return _error(rid, INVALID_REQUEST, f"this worker is a {self.role}")
        return {
            "id": rid,
            "ok": True,
            "protocol": PROTOCOL_VERSION,
            "worker_id": request.get("worker_id"),
            "sdk": SDK,
            "capabilities": self.capabilities,
        }


class Implementation(Worker):
    """Role ``implementation``: prepare(request) -> state; execute(state, result_dir) -> data."""

    role = "implementation"

    def __init__(self) -> None:
        super().__init__(capabilities=("one_shot",))
        self._state: Any = None
        self._prepare_fn: Callable[[dict[str, Any]], Any] = lambda request: request
        self._reset_fn: Callable[[], None] = lambda: None
        self.handle("prepare", self._on_prepare)
        self.handle("reset", self._on_reset)

    def prepare(self, fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        self._prepare_fn = fn
        return fn

    def reset(self, fn: Callable[[], None]) -> Callable[[], None]:
        self._reset_fn = fn
        return fn

    def execute(self, fn: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
        def on_execute(request: dict[str, Any]) -> dict[str, Any]:
            result_dir = request["result_dir"]
            started = time.perf_counter_ns()
            outcome = fn(self._state, result_dir)
            elapsed = time.perf_counter_ns() - started
            data, statistics = outcome if isinstance(outcome, tuple) else (outcome, {})
            # Inside the timed envelope (the execute response): no digests, which the harness
            # takes of the whole result tree anyway, and no fsync, whose disk latency (0.4 ms
            # median, 8 ms at p90 on this host) was the noisiest part of a 5 ms envelope. The
            # harness reads the result at once; the run store decides what reaches the disk.
            manifest = {
                "schema_version": 1,
                "data": data if data is not None else {},
                "files": file_entries(result_dir, RESULT_MANIFEST, digests=False),
            }
            write_document(os.path.join(result_dir, RESULT_MANIFEST), manifest, durable=False)
            return {
                "result": {"manifest": RESULT_MANIFEST},
                "statistics": statistics,
                "implementation_time_ns": elapsed,
            }

        self.handle("execute", on_execute)
        return fn

    def _on_prepare(self, request: dict[str, Any]) -> None:
        self._state = self._prepare_fn(request)

    def _on_reset(self, request: dict[str, Any]) -> None:
        self._state = None
        self._reset_fn()


class Materializer(Worker):
    """Role ``dataset_materializer``: materialize(parameters, seed, output_dir) writes files."""

    role = "dataset_materializer"

    def materialize(self, fn: Callable[[dict, int, str], Any]) -> Callable[[dict, int, str], Any]:
        def on_materialize(request: dict[str, Any]) -> dict[str, Any]:
            out = request["output_dir"]
            fn(request.get("dataset_parameters") or {}, int(request.get("dataset_seed", 0)), out)
            manifest = {
                "schema_version": 1,
                "complete": True,
                "files": file_entries(out, DATASET_MANIFEST),
            }
            write_document(os.path.join(out, DATASET_MANIFEST), manifest)
            return {"dataset": {"manifest": DATASET_MANIFEST}}

        self.handle("materialize", on_materialize)
        return fn


class Transformer(Worker):
    """Role ``dataset_transformer``: transform(source_dir, parameters, seed, output_dir) derives a
    dataset from another one (``source_dir`` is read-only: changing it fails the dataset)."""

    role = "dataset_transformer"

    def transform(
        self, fn: Callable[[str, dict, int, str], Any]
    ) -> Callable[[str, dict, int, str], Any]:
        def on_transform(request: dict[str, Any]) -> dict[str, Any]:
            out = request["output_dir"]
            parameters = request.get("dataset_parameters") or {}
            fn(request["source_dataset_dir"], parameters, int(request.get("dataset_seed", 0)), out)
            manifest = {
                "schema_version": 1,
                "complete": True,
                "files": file_entries(out, DATASET_MANIFEST),
            }
            write_document(os.path.join(out, DATASET_MANIFEST), manifest)
            return {"dataset": {"manifest": DATASET_MANIFEST}}

        self.handle("transform", on_transform)
        return fn


class Evaluator(Worker):
    """Role ``problem_evaluator``: evaluate(request, result) -> metrics data (a JSON object).

    ``result`` is the parsed result manifest (``data`` and ``files``); raise ``WorkerFailure`` when
    the result is wrong in a way the evaluator refuses to grade.
    """

    role = "problem_evaluator"

    def evaluate(self, fn: Callable[[dict, dict], dict]) -> Callable[[dict, dict], dict]:
        def on_evaluate(request: dict[str, Any]) -> None:
            with open(os.path.join(request["result_dir"], RESULT_MANIFEST), "rb") as fh:
                result = canonical.loads(fh.read())
            metrics = fn(request, result)
            # read by the harness at once, like the result: no fsync on every attempt's path
            document = {"schema_version": 1, "data": metrics}
            write_document(request["metrics_path"], document, durable=False)

        self.handle("evaluate", on_evaluate)
        return fn


class _LineStream:
    """Reads LF-terminated lines from an unbuffered fd without Python's text layer."""

    def __init__(self, fh: Any) -> None:
        self._fh = fh
        self._buf = b""

    def next_line(self) -> bytes | None:
        while b"\n" not in self._buf:
            chunk = self._fh.read(65536)
            if not chunk:
                return None
            self._buf += chunk
            if len(self._buf) > MAX_LINE_BYTES and b"\n" not in self._buf:
                self._buf = b""
                return b""
        line, _, self._buf = self._buf.partition(b"\n")
        return line


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        value = canonical.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _error(rid: str, code: str, message: str, details: dict | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return {"id": rid, "ok": False, "error": error}


def _send(fd: int, message: dict[str, Any]) -> None:
    data = canonical.line(message)
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
