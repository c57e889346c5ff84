"""drivers/ops.json as the CLI and the docs show it, and a malformed matrix refused by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from metewand.suites.browser import driver_ops, op_probes
from shared_paths import REPO_ROOT


def test_the_docs_page_is_the_generated_matrix() -> None:
    expected = driver_ops.markdown(driver_ops.load_matrix()) + "\n"
    assert (REPO_ROOT / "docs" / "driver-ops.md").read_text() == expected, (
        "regenerate: metewand browser ops --markdown > docs/driver-ops.md"
    )


def test_every_op_of_the_matrix_has_a_probe_and_every_refusal_a_reason() -> None:
    matrix = driver_ops.load_matrix()
    assert sorted(o["op"] for o in matrix.ops) == sorted(op_probes.PROBES)
    done, total = matrix.coverage()
    assert total == 52 * 9 and done / total >= 0.9
    for cell in matrix.cells():
        if not cell.implemented:
            assert cell.cannot and len(cell.cannot) > 20, cell  # a reason, not a shrug


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (
            lambda d: d["ops"][3]["cells"]["selenium"].update(cannot="x"),
            "ops[3] (goto).cells.selenium",
        ),
        (lambda d: d["paths"].pop("stagehand"), "paths:"),
        (lambda d: d["ops"].append(dict(d["ops"][0])), "ops[52].op: missing or repeated"),
    ],
)
def test_a_malformed_matrix_names_the_file_and_key(mutate, named: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(driver_ops.OPS_FILE.read_text())
    mutate(data)
    broken = tmp_path / "ops.json"
    broken.write_text(json.dumps(data))
    with pytest.raises(driver_ops.MatrixError) as caught:
        driver_ops.load_matrix(broken)
    assert str(broken) in str(caught.value) and named in str(caught.value)


def test_an_unknown_path_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "browser", "ops", "--path", "nope"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert done.returncode == 2 and "--path nope: not one of playwright" in done.stderr
