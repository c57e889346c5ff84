"""A raw version-1 worker with the behaviour of the Rust metewand's raw fixture workers.

Our own worker (no code of the Rust project): its ``docs/raw-worker-fixtures.md`` describes the
fixture workers' behaviour, and this file has that behaviour, so a Rust-dialect manifest can run
end to end here. It speaks the wire protocol directly with the standard library and answers the
hello with ``sdk: null``. Usage: ``sum_worker.py ROLE [--stdio]`` with ROLE one of
``dataset_materializer``, ``implementation``, ``problem_evaluator``; ``--stdio`` speaks on
stdin/stdout instead of the two descriptors named by METEWAND_PROTOCOL_READ_FD/_WRITE_FD.

- materializer: ``materialize`` takes integer ``values`` from the dataset parameters, writes
  ``data.json`` (``{"dataset_seed", "values"}``), then ``dataset-manifest.json`` last (its
  path, media type, SHA-256 and size);
- implementation: ``prepare`` reads ``data.json`` and requires ``algorithm = "sum"`` among the
  implementation parameters; ``execute`` writes ``result.json`` with the answer ``sum(values)``
  plus the integer problem parameter ``offset`` (default 0), statistics ``input_count``;
  ``reset`` forgets the prepared state;
- evaluator: ``evaluate`` recomputes the answer and writes ``absolute_error`` at
  ``metrics_path``.

Result and metrics documents name the schemas ``schemas/result.json`` and
``schemas/metrics.json`` (the raw fixtures' layout). ``RAW_FIXTURE_ANSWER_OFFSET`` in the
environment adds to the implementation's answer (to make a wrong result on purpose).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any


def encode(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def write(path: str, data: bytes) -> None:
    with open(path, "wb") as out:
        out.write(data)


def read_json(path: str) -> Any:
    with open(path, "rb") as source:
        return json.loads(source.read())


class Fail(Exception):
    pass


def materialize(request: dict[str, Any]) -> dict[str, Any]:
    values = request["dataset_parameters"].get("values")
    if not isinstance(values, list) or not values or any(type(v) is not int for v in values):
        raise Fail("dataset_parameters.values must be a non-empty array of integers")
    out = request["output_dir"]
    os.makedirs(out, exist_ok=True)
    data = encode({"dataset_seed": request["dataset_seed"], "values": values})
    write(os.path.join(out, "data.json"), data)
    entry = {
        "media_type": "application/json",
        "path": "data.json",
        "sha256": hashlib.sha256(data).hexdigest(),
        "size_bytes": len(data),
    }
    manifest = {"complete": True, "files": [entry], "schema_version": 1}
    write(os.path.join(out, "dataset-manifest.json"), encode(manifest))  # the manifest last
    return {"dataset": {"manifest": "dataset-manifest.json"}}


def dataset_values(dataset_dir: str) -> list[int]:
    values = read_json(os.path.join(dataset_dir, "data.json")).get("values")
    if not isinstance(values, list) or any(type(v) is not int for v in values):
        raise Fail("data.json values must be integers")
    return values


def offset_of(problem_parameters: dict[str, Any]) -> int:
    offset = problem_parameters.get("offset", 0)
    if type(offset) is not int:
        raise Fail("problem_parameters.offset must be an integer")
    return offset


class Implementation:
    def __init__(self) -> None:
        self.prepared: tuple[list[int], int] | None = None

    def prepare(self, request: dict[str, Any]) -> dict[str, Any]:
        if request["implementation_parameters"].get("algorithm") != "sum":
            raise Fail("this implementation needs algorithm = 'sum'")
        values = dataset_values(request["dataset_dir"])
        self.prepared = (values, offset_of(request["problem_parameters"]))
        return {}

    def execute(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.prepared is None:
            raise Fail("execute before a successful prepare")
        values, offset = self.prepared
        answer = sum(values) + offset + int(os.environ.get("RAW_FIXTURE_ANSWER_OFFSET", "0"))
        result_dir = request["result_dir"]
        os.makedirs(result_dir, exist_ok=True)
        document = {
            "data": {"answer": answer},
            "files": [],
            "schema": "schemas/result.json",
            "schema_version": 1,
        }
        write(os.path.join(result_dir, "result.json"), encode(document))
        return {
            "implementation_time_ns": None,
            "result": {"manifest": "result.json"},
            "statistics": {"input_count": len(values)},
        }

    def reset(self, request: dict[str, Any]) -> dict[str, Any]:
        self.prepared = None
        return {}


def evaluate(request: dict[str, Any]) -> dict[str, Any]:
    values = dataset_values(request["dataset_dir"])
    result = read_json(os.path.join(request["result_dir"], "result.json"))
    answer = result.get("data", {}).get("answer")
    if type(answer) is not int:
        raise Fail("result.data.answer must be an integer")
    expected = sum(values) + offset_of(request["problem_parameters"])
    metrics = {
        "data": {"absolute_error": abs(answer - expected)},
        "schema": "schemas/metrics.json",
        "schema_version": 1,
    }
    os.makedirs(os.path.dirname(request["metrics_path"]), exist_ok=True)
    write(request["metrics_path"], encode(metrics))
    return {}


def handlers(role: str) -> dict[str, Any]:
    if role == "dataset_materializer":
        return {"materialize": materialize}
    if role == "implementation":
        impl = Implementation()
        return {"prepare": impl.prepare, "execute": impl.execute, "reset": impl.reset}
    if role == "problem_evaluator":
        return {"evaluate": evaluate}
    raise SystemExit(f"unknown role {role!r}")


def streams(stdio: bool) -> tuple[Any, Any]:
    if stdio:
        return sys.stdin.buffer, sys.stdout.buffer
    reader = os.fdopen(int(os.environ["METEWAND_PROTOCOL_READ_FD"]), "rb", buffering=0)
    writer = os.fdopen(int(os.environ["METEWAND_PROTOCOL_WRITE_FD"]), "wb", buffering=0)
    return reader, writer


def serve(role: str, stdio: bool) -> int:
    reader, writer = streams(stdio)
    methods = handlers(role)
    while line := reader.readline():
        request = json.loads(line)
        rid, method = request["id"], request["method"]
        if method == "hello":
            caps = ["one_shot"] if role == "implementation" else []
            reply = {"capabilities": caps, "protocol": 1, "sdk": None, "worker_id": request["worker_id"]}
        elif method == "shutdown":
            writer.write(encode({"id": rid, "ok": True}))
            writer.flush()
            return 0
        elif method in methods:
            try:
                reply = methods[method](request)
            except (Fail, KeyError, OSError, ValueError) as exc:
                error = {"code": "operation_failed", "message": str(exc) or type(exc).__name__}
                writer.write(encode({"error": error, "id": rid, "ok": False}))
                writer.flush()
                continue
        else:
            error = {"code": "unsupported_operation", "message": f"{role} has no {method}"}
            writer.write(encode({"error": error, "id": rid, "ok": False}))
            writer.flush()
            continue
        writer.write(encode({"id": rid, "ok": True, **reply}))
        writer.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(serve(sys.argv[1], "--stdio" in sys.argv[2:]))
