"""Benchmark repositories around the Rust fixtures, written into a scratch directory.

A Rust manifest is planned against its repository (contract files, schemas, source bundles).
The fixtures give the manifests and the contract; the rest of each repository is ours and as
small as the rules allow: 2020-12 schemas accepting what the fixture's values need, one-line
source files, and reference-case files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

DRAFT = "https://json-schema.org/draft/2020-12/schema"
COMPLETE_CONTRACT = "fixtures/problem-contract/v1/complete.toml"
SEMANTICS = "fixtures/problem-contract/v1/schemas/semantics.json"


def schema(**properties: Any) -> dict[str, Any]:
    return {"$schema": DRAFT, "type": "object", "properties": properties}


# Our stand-ins for the contract fixture's parameters/dataset/result/metrics schemas (not in
# the index): objects, with the properties the manifests' values need.
CONTRACT_SCHEMAS = {
    "schemas/parameters.json": schema(centered={"type": "boolean"}, offset={"type": "integer"}),
    "schemas/dataset.json": schema(),
    "schemas/result.json": schema(),
    "schemas/metrics.json": schema(),
}


def write(root: Path, files: dict[str, Any]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, "utf-8")
        else:
            path.write_text(json.dumps(content, indent=2) + "\n", "utf-8")


def contract_files(vectors: Path, contract_path: str, dataset_free: bool = False) -> dict[str, Any]:
    text = (vectors / COMPLETE_CONTRACT).read_text("utf-8")
    if dataset_free:
        text = text.replace('dataset_schemas = ["schemas/dataset.json"]', "dataset_schemas = []")
        text = text.replace('dataset = "fixtures/small/dataset"\n', "")
    return {
        contract_path: text,
        **CONTRACT_SCHEMAS,
        "schemas/semantics.json": (vectors / SEMANTICS).read_bytes(),
        "fixtures/small/dataset/data.json": {"values": [1]},
        "fixtures/small/result/result.json": {"data": {}},
        "fixtures/small/metrics.json": {"data": {}},
    }


def complete(vectors: Path, root: Path, manifest_text: str | None = None) -> Path:
    """The manifest fixture's repository: every file it names, and its contract."""
    files: dict[str, Any] = contract_files(vectors, "problems/example.toml")
    text = files["problems/example.toml"].replace('name = "regression"', 'name = "example"')
    files["problems/example.toml"] = text.replace("fixtures/small", "problems/small")
    for rel in [k for k in files if k.startswith("fixtures/small")]:
        files[rel.replace("fixtures/small", "problems/small")] = files.pop(rel)
    files |= {
        "schemas/generator.json": schema(rows={"type": "integer", "minimum": 1}),
        "schemas/implementation.json": schema(tolerance={"type": "number"}),
        "datasets/fixed/values.json": {"values": [1, 2, 3]},
        "datasets/generate.py": "# generator\n",
        "problems/evaluate.jl": "# evaluator\n",
        "implementations/solve.R": "# solver\n",
        "implementations/config.toml": "tolerance = 1e-8\n",
    }
    write(root, files)
    manifest = root / "metewand.toml"
    shutil.copyfile(vectors / "fixtures/manifest/v1/complete.toml", manifest)
    if manifest_text is not None:
        manifest.write_text(manifest_text, "utf-8")
    return manifest


def logical_plan(vectors: Path, root: Path, manifest_text: str, dataset_free: bool) -> Path:
    """The Rust logical-planning test's repository."""
    files = contract_files(vectors, "problems/regression.toml", dataset_free)
    files["datasets/fixed.json"] = {"values": [1, 2, 3]}
    write(root, files)
    manifest = root / "metewand.toml"
    manifest.write_text(manifest_text, "utf-8")
    return manifest


RAW_MANIFEST = """\
version = 1
name = "raw-fixtures"

[environments.local]
kind = "local"

[datasets.fixed]
output_schema = "schemas/dataset.json"
sources = ["fixed-dataset/data.json"]

[datasets.generated]
output_schema = "schemas/dataset.json"
parameter_schema = "schemas/values.json"
runner = "python"
entrypoint = "workers/raw_fixture_worker.py"
args = ["dataset_materializer"]
sources = ["workers/raw_fixture_worker.py"]
environment = "local"

[problems.sum]
contract = "problems/sum.toml"

[problems.sum.evaluator]
runner = "python"
entrypoint = "workers/raw_fixture_worker.py"
args = ["problem_evaluator", "--stdio"]
sources = ["workers/raw_fixture_worker.py"]
environment = "local"
protocol_transport = "stdio"

[implementations.sum]
runner = "python"
entrypoint = "workers/raw_fixture_worker.py"
args = ["implementation"]
sources = ["workers/raw_fixture_worker.py"]
environment = "local"
problem_contracts = ["sum"]
parameter_schema = "schemas/implementation.json"
parameter_defaults = { algorithm = "sum" }
capabilities = ["one_shot"]

[execution_policies.default]
version = 1

[observation_policies.final]
version = 1
kind = "one_shot"

[[experiments]]
name = "raw"
problem = "sum"
datasets = ["fixed", "generated"]
implementations = ["sum"]
execution_policy = "default"
observation_policy = "final"
implementation_repetitions = 1
measurement_repetitions = 2
seed = 17

[experiments.problem_parameters]
offset = { value = 2 }

[experiments.dataset_parameters.generated]
values = { grid = [[4, 5], [1, 2, 3]] }
"""

RAW_CONTRACT = """\
version = 1
name = "sum"
family = "arithmetic"
parameter_schema = "schemas/parameters.json"
dataset_schemas = ["schemas/dataset.json"]
result_schema = "schemas/result.json"
metric_schema = "schemas/metrics.json"
semantics_schema = "schemas/semantics.json"
allowed_timing_scopes = ["cold_end_to_end", "prepare_and_execute", "execute_only"]
supported_budgets = ["none"]

[semantics.validity]
answer = "integer"

[semantics.one_shot_completion]
maximum_absolute_error = 0

[[reference_cases]]
dataset = "reference/dataset"
result = "reference/result"
expected_metrics = "reference/metrics.json"
"""


def raw_fixtures(vectors: Path, root: Path, worker: Path) -> Path:
    """A Rust-dialect benchmark over our raw fixture worker: a fixed dataset (the Rust fixture's
    ``fixed-dataset/data.json``), a generated one, the sum problem and its reference case."""
    fixture = vectors / "fixtures/worker-protocol/v1"
    semantics = schema(
        validity={"type": "object", "minProperties": 1},
        one_shot_completion={"type": "object", "minProperties": 1},
    )
    write(
        root,
        {
            "metewand.toml": RAW_MANIFEST,
            "problems/sum.toml": RAW_CONTRACT,
            "workers/raw_fixture_worker.py": worker.read_bytes(),
            "fixed-dataset/data.json": (fixture / "fixed-dataset/data.json").read_bytes(),
            "schemas/dataset.json": (fixture / "schemas/dataset.json").read_bytes(),
            "schemas/result.json": (fixture / "schemas/result.json").read_bytes(),
            "schemas/metrics.json": (fixture / "schemas/metrics.json").read_bytes(),
            "schemas/parameters.json": schema(offset={"type": "integer"}),
            "schemas/values.json": schema(values={"type": "array", "items": {"type": "integer"}}),
            "schemas/implementation.json": schema(algorithm={"enum": ["sum"]}),
            "schemas/semantics.json": semantics,
            "reference/dataset/data.json": (fixture / "fixed-dataset/data.json").read_bytes(),
            "reference/result/result.json": {  # the problem's defaults: offset 0
                "data": {"answer": 6},
                "files": [],
                "schema": "schemas/result.json",
                "schema_version": 1,
            },
            "reference/metrics.json": {
                "data": {"absolute_error": 0},
                "schema": "schemas/metrics.json",
                "schema_version": 1,
            },
        },
    )
    return root / "metewand.toml"
