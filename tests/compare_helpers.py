"""Real sorting-example runs for the compare and per-case tests (no mocks: real workers)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SORTING = ROOT / "examples" / "sorting"
DELAYED = Path(__file__).parent / "workers" / "delayed_sort.py"
# what examples/sorting/metewand.toml ships with: 20 (scaling) and 10 (presorted)
SHIPPED_REPETITIONS = re.compile(r"^repetitions = (20|10)$", re.MULTILINE)


def sorting_copy(directory: Path, repetitions: int = 2) -> Path:
    """A copy of the sorting example whose experiments run ``repetitions`` times (the shipped
    20 and 10 are what its comparisons need; most tests need the example's shape, not its
    statistics). Returns the copy's manifest."""
    root = directory / "sorting"
    shutil.copytree(SORTING, root, ignore=shutil.ignore_patterns("runs"))
    manifest = root / "metewand.toml"
    text = manifest.read_text()
    text, found = SHIPPED_REPETITIONS.subn(f"repetitions = {repetitions}", text)
    assert found == 2, "the example's repetitions changed: update this helper"
    manifest.write_text(text)
    return manifest


def sorting_manifest(
    directory: Path,
    slowdown: float = 1.0,
    repetitions: int = 5,
    delay_ms: int = 40,
    burn: bool = False,
) -> Path:
    """The sorting example's datasets and evaluator with two delayed built-in-sort workers.

    ``slow`` sleeps ``delay_ms * slowdown`` per execute; ``steady`` always sleeps ``delay_ms``;
    with ``burn`` they spend that time on the CPU instead of asleep.
    """
    env = (
        f'METEWAND_SORTING_WORKERS = "{SORTING / "workers"}", METEWAND_TEST_DELAY_MS = "{delay_ms}"'
    )
    if burn:
        env += ', METEWAND_TEST_BURN = "1"'
    body = f"""version = 1
name = "sorting-delay"

[datasets.integers]
kind = "generated"
materializer = {{ runner = "python", entrypoint = "{SORTING / "workers" / "generate.py"}" }}
parameter_defaults = {{ size = 1000, distribution = "uniform" }}

[datasets.integers.parameter_schema]
type = "object"
required = ["size", "distribution"]
additionalProperties = false
properties.size = {{ type = "integer", minimum = 0 }}
properties.distribution = {{ enum = ["uniform", "sorted", "reversed", "few_unique"] }}

[problems.sort]
evaluator = {{ runner = "python", entrypoint = "{SORTING / "workers" / "evaluate.py"}" }}
result_schema = "{SORTING / "schemas" / "result.schema.json"}"
metric_schema = "{SORTING / "schemas" / "metrics.schema.json"}"

[implementations.slow]
runner = "python"
entrypoint = "{DELAYED}"
env = {{ {env}, METEWAND_TEST_SLOWDOWN = "{slowdown}" }}
problems = ["sort"]

[implementations.steady]
runner = "python"
entrypoint = "{DELAYED}"
env = {{ {env} }}
problems = ["sort"]

[execution_policies.default]
timing_scope = "prepare_and_execute"
timeout = "30 s"
run_order = "randomized"

[[experiments]]
name = "scaling"
problem = "sort"
datasets = ["integers"]
implementations = ["slow", "steady"]
repetitions = {repetitions}
seed = 42
execution_policy = "default"

[experiments.dataset_parameters.integers]
size = {{ grid = [200, 2000] }}
distribution = "uniform"
"""
    path = directory / "metewand.toml"
    path.write_text(body)
    return path


def metewand(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process (what a user or CI runs)."""
    proc = subprocess.run(
        [sys.executable, "-m", "metewand", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"metewand {args} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def run_manifest(manifest: Path, tmp: Path, run_id: str) -> Path:
    metewand(
        "run",
        manifest,
        "--out",
        tmp / "runs",
        "--cache-dir",
        tmp / "cache",
        "--run-id",
        run_id,
        "--quiet",
        "--no-report",  # compare reads the rows; report.html's plotting is not under test here
    )
    return tmp / "runs" / run_id
