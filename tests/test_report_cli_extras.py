"""progress reporter modes and `metewand inspect` on synthetic runs."""

from __future__ import annotations

import io
from pathlib import Path

from click.testing import CliRunner

import synthetic_runs as synthetic
from metewand import canonical
from metewand.cli.main import cli
from metewand.cli.progress import Progress


def test_plain_progress_lines_counts_and_summary() -> None:
    out = io.StringIO()
    progress = Progress(total=3, mode="auto", stream=out, plain_every_s=0.0)
    assert progress.mode == "plain"  # StringIO is not a TTY
    progress.start()
    for label, status in (
        ("t1 x chrome", "pass"),
        ("t1 x lightpanda", "fail"),
        ("t2 x chrome", "pass"),
    ):
        progress.attempt_started(label)
        progress.attempt_finished(status)
    progress.close()
    text = out.getvalue()
    assert "[1/3] pass=1" in text and "current t1 x chrome" in text
    assert "[3/3] fail=1 pass=2 eta 0s" in text
    assert text.rstrip().splitlines()[-1].startswith("done 3/3")


def test_quiet_progress_prints_nothing_and_rich_draws_summary() -> None:
    quiet = io.StringIO()
    progress = Progress(total=1, mode="quiet", stream=quiet)
    progress.start()
    progress.attempt_finished("pass")
    progress.close()
    assert quiet.getvalue() == ""
    fancy = io.StringIO()
    progress = Progress(total=2, mode="rich", stream=fancy)
    progress.start()
    progress.attempt_started("t1 x chrome")
    progress.attempt_finished("timeout")
    progress.close()
    assert "attempts by status" in fancy.getvalue() and "timeout" in fancy.getvalue()


def test_inspect_browser_attempt_shows_cdp_errors(tmp_path: Path) -> None:
    run = synthetic.write_browser_run(tmp_path / "run_i", n_tasks=3, k=1, telemetry=False)
    key = "l1/l1.raw_cdp/task_00001/chrome/1"
    log = run / "artifacts" / key / "cdp.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(
        canonical.line({"method": "Page.navigate", "ok": True})
        + canonical.line({"method": "DOM.foo", "error": {"code": -32601, "message": "not found"}})
    )
    args = ["inspect", str(run), "--task", "task_00001", "--engine", "chrome", "--attempt", "1"]
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    info = canonical.loads(result.stdout)
    assert info["key"] == key
    assert info["last_cdp_errors"][0]["error"]["code"] == -32601
    assert info["artifacts"]["cdp_log"] == str(log)
    text = CliRunner().invoke(cli, args).output
    assert "measurement pss_peak_bytes:" in text
    missing = CliRunner().invoke(cli, ["inspect", str(run), "--key", "nope"])
    assert missing.exit_code == 2


KEY_R1 = "sorting/default/integers@0000000000/python@0000000000/r1"


def test_inspect_compute_attempt_by_key(tmp_path: Path) -> None:
    run = synthetic.write_compute_run(tmp_path / "run_ci", attempts=2)
    result = CliRunner().invoke(cli, ["inspect", str(run), "--key", KEY_R1])
    assert result.exit_code == 0, result.output
    assert "measurement materialization_time_ns: unavailable (provided_dataset)" in result.output
    assert "(partial: process_only)" in result.output
