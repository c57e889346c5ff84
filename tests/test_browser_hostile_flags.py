"""Issue 12 items 8 and 10 (browser side): hostile flags and refused resumes exit 2 with a
message naming the flag or file, never a traceback, and nothing is created or rewritten."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from browser_run_helpers import ABOUT_BLANK_TASK, cli, rows_of, tiny_corpus
from compute_helpers import FAULT, problem, python_impl, write_manifest
from compute_helpers import run as compute_run

BUILTIN_TASK = "own_autoattach_event_session"
COMPUTE_EXPERIMENT = f"""
[datasets.numbers]
kind = "generated"
materializer = {{ runner = "python", entrypoint = "{FAULT}", args = ["gen"] }}
parameter_defaults = {{ size = 1 }}

[[experiments]]
name = "one"
problem = "answer"
datasets = ["numbers"]
implementations = ["impl_a"]
repetitions = 1
"""


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--k", "1e9"], "--k"),
        (["--k", "1000000000"], "--k"),
        (["--k", "0"], "--k"),
        (["--timeout-scale", "nan"], "--timeout-scale"),
        (["--timeout-scale", "inf"], "--timeout-scale"),
        (["--timeout-scale", "-1"], "--timeout-scale"),
        (["--host-sample-interval-s", "nan"], "--host-sample-interval-s"),
        (["--host-sample-interval-s", "inf"], "--host-sample-interval-s"),
        (["--host-sample-interval-s", "0"], "--host-sample-interval-s"),
        (["--host-sample-interval-s", "0.05"], "--host-sample-interval-s"),
        (["--resource-max-observer-effect-pct", "nan"], "--resource-max-observer-effect-pct"),
        (["--resource-max-observer-effect-pct", "inf"], "--resource-max-observer-effect-pct"),
        (["--resource-max-observer-effect-pct", "0"], "--resource-max-observer-effect-pct"),
        (["--jobs", "100000"], "--jobs"),
        (["--host-foreign-cpu-max", "nan"], "--host-foreign-cpu-max"),
        (["--host-foreign-cpu-max", "inf"], "--host-foreign-cpu-max"),
        (
            ["--resource-profile", "engine", "--resource-calibration-baseline", "/no/such/run"],
            "--resource-calibration-baseline",
        ),
        (["--resource-sample-interval-ms", "99999999999999"], "--resource-sample-interval-ms"),
        (["--cold-start-samples", "1000000000"], "--cold-start-samples"),
    ],
)
def test_hostile_flag_exits_2_and_creates_nothing(
    tmp_path: Path, flags: list[str], named: str
) -> None:
    out = tmp_path / "runs"
    started = time.monotonic()
    done = cli(
        "browser",
        "run",
        "--engines",
        "chrome",
        "--task",
        BUILTIN_TASK,
        "--out",
        str(out),
        "--no-progress",
        *flags,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and named in done.stderr, done.stderr
    assert not out.exists() or not any(out.iterdir())
    assert time.monotonic() - started < 30  # refused before any plan is expanded


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}


def test_browser_resume_of_a_compute_run_is_refused_untouched(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path, python_impl("impl_a", "ok") + problem() + COMPUTE_EXPERIMENT
    )
    summary = compute_run(manifest, tmp_path)
    run_dir = Path(summary.run_dir)
    before = _snapshot(run_dir)
    done = cli("browser", "run", "--resume", str(run_dir), "--no-progress", timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "not a browser run" in done.stderr, done.stderr
    assert "run_manifest.json" in done.stderr
    assert _snapshot(run_dir) == before


def test_refused_resume_after_a_corpus_change_rewrites_nothing(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"tiny.json": ABOUT_BLANK_TASK})
    out = tmp_path / "runs"
    first = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "chrome",
        "--out",
        str(out),
        "--run-id",
        "r",
        "--no-progress",
    )
    assert first.returncode == 0, first.stderr
    run_dir = out / "r"
    assert len(rows_of(run_dir)) == 1
    with (run_dir / "results.jsonl").open("ab") as results:
        results.write(b'{"key": "torn')  # a torn tail a real resume would cut
    (corpus / "fixtures" / "added.txt").write_text("a fixture added after the run started")
    before = _snapshot(run_dir)
    done = cli("browser", "run", "--resume", str(run_dir), "--no-progress", timeout=120)
    assert done.returncode == 2, done.stderr
    assert "corpus changed" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert _snapshot(run_dir) == before  # manifest (state, resumed_at) and rows as they were


def test_browser_resume_of_an_unreadable_manifest_is_refused_untouched(tmp_path: Path) -> None:
    for name, content in (
        ("not_utf8", b"\xff\xfe{"),
        ("truncated", b'{"schema": "metewand_run_manifest/1", "run_id": "x"'),
        (
            "no_config",
            b'{"data":{"suite":"browser"},"run_id":"x","schema":'
            b'"metewand_run_manifest/1","state":"interrupted"}',
        ),
    ):
        run_dir = tmp_path / name
        run_dir.mkdir()
        (run_dir / "run_manifest.json").write_bytes(content)
        (run_dir / "results.jsonl").write_bytes(b'{"key": "torn')
        before = _snapshot(run_dir)
        done = cli("browser", "run", "--resume", str(run_dir), "--no-progress", timeout=60)
        assert done.returncode == 2, (name, done.stderr)
        assert "Traceback" not in done.stderr and "run_manifest.json" in done.stderr, done.stderr
        assert _snapshot(run_dir) == before, name


def test_out_that_is_a_file_exits_2_without_a_traceback(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    for out in (a_file, a_file / "below"):
        done = cli(
            "browser",
            "run",
            "--engines",
            "chrome",
            "--task",
            BUILTIN_TASK,
            "--out",
            str(out),
            "--no-progress",
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and f"--out {out}" in done.stderr, done.stderr
    assert a_file.read_text() == "not a directory"
