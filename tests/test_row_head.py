"""The shared row head (runtime.row_head) on the rows real compute and browser runs write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import ABOUT_BLANK_TASK, rows_of, tiny_corpus
from compute_helpers import problem, python_impl, run, write_manifest
from metewand import canonical
from metewand.runtime.row_head import RowHead
from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.runner import run_browser

OPTIONAL = ("run_id", "started_at", "finished_at")


def _head_of(row: dict[str, Any]) -> RowHead:
    """The head read back from a row: its fields, with the declared types."""
    head = RowHead(
        **{name: row[name] for name in ("key", "status", "attempt", "artifacts")},
        **{name: row[name] for name in OPTIONAL if name in row},
    )
    assert isinstance(head.key, str) and isinstance(head.attempt, int), row
    assert head.fields() == {name: row[name] for name in head.fields()}
    return head


def test_optional_fields_are_written_only_when_set() -> None:
    bare = RowHead("k", "accepted", 0, "artifacts/k")
    assert bare.fields() == {
        "key": "k",
        "status": "accepted",
        "attempt": 0,
        "artifacts": "artifacts/k",
    }
    full = RowHead("k", "pass", 1, [], "r", "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z")
    assert set(full.fields()) == {"key", "status", "attempt", "artifacts", *OPTIONAL}


def test_compute_rows_carry_the_head(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        problem()
        + python_impl("fine", "ok")
        + """
[[experiments]]
name = "head"
problem = "answer"
implementations = ["fine"]
repetitions = 2
""",
    )
    summary = run(manifest, tmp_path)
    on_disk = rows_of(Path(summary.run_dir))
    assert [canonical.dumps(r) for r in on_disk] == [canonical.dumps(r) for r in summary.rows]
    heads = [_head_of(row) for row in on_disk]
    assert len(heads) == 2 and len({h.key for h in heads}) == 2
    for head, row in zip(heads, on_disk, strict=True):
        assert head.status == "accepted" and head.attempt == 0
        assert head.artifacts == f"artifacts/{head.key}"
        assert (Path(summary.run_dir) / head.artifacts).is_dir()
        # compute keeps the run id in the manifest and the times in the attempt record
        assert not set(OPTIONAL) & set(row)
        assert row["record"]["started_at"] and row["record"]["finished_at"]


@pytest.mark.engines
def test_browser_rows_carry_the_head(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    result = run_browser(
        RunConfig(str(corpus), ("chrome",), k=2, seed="t"),
        tmp_path / "runs",
        "head",
        echo=lambda _text: None,
    )
    assert result.exit_code == 0 and result.run_dir is not None
    heads = [_head_of(row) for row in rows_of(result.run_dir)]
    assert sorted(h.attempt for h in heads) == [1, 2]  # the peer's repetition, from 1
    for head in heads:
        assert head.status == "pass" and head.run_id == "head"
        assert head.started_at is not None and head.finished_at is not None
        assert head.started_at <= head.finished_at
        assert isinstance(head.artifacts, list) and head.artifacts
        assert all((result.run_dir / rel).is_file() for rel in head.artifacts)
