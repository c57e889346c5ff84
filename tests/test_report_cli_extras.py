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


def _inspect(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(cli, ["inspect", *args])
    return done.exit_code, done.stdout, done.stderr


def test_inspect_compute_attempt_by_readable_selectors(tmp_path: Path) -> None:
    """Issue #30: --implementation/--case/--repetition instead of hash keys; the case as the
    run's table spells it, or part of it; a failed attempt shows code and message, an accepted
    one no null fields."""
    run = synthetic.write_compute_run(tmp_path / "run_c", attempts=3, warmups=1, cases=2)
    rows = [canonical.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    code, out, _ = _inspect(
        str(run), "--implementation", "numpy", "--case", "sorting: size=2000", "--repetition", "2"
    )
    assert code == 0, out
    (wanted,) = [
        r
        for r in rows
        if r["implementation"] == "numpy"
        and r["role"] == "measured"
        and r["dataset_parameters"]["size"] == 2000
        and r["repetition"] == 2
    ]
    assert f"key: {wanted['key']}" in out
    assert "select_with: --implementation numpy --case 'sorting: size=2000' --repetition 2" in out
    assert "None" not in out and "failure_class" not in out
    # the same attempt by a part of its case; the warm-up of that case only with --warmup
    assert (
        _inspect(str(run), "--implementation", "numpy", "--case", "size=2000", "--repetition", "2")[
            1
        ]
        == out
    )
    code, out, _ = _inspect(
        str(run), "--implementation", "numpy", "--case", "size=2000", "--warmup"
    )
    assert (
        code == 0
        and out.startswith("key: sorting/default/integers@0000002000/numpy@")
        and "/w0" in out
    )
    failed = next(r for r in rows if r["status"] == "failed")
    code, out, _ = _inspect(str(run), "--key", failed["key"])
    assert (
        code == 0 and "code: result_invalid" in out and "message: synthetic invalid result" in out
    )


def test_inspect_compute_selection_that_is_not_one_attempt_is_refused(tmp_path: Path) -> None:
    run = synthetic.write_compute_run(tmp_path / "run_c", attempts=2, cases=2)
    code, _, err = _inspect(str(run), "--implementation", "python", "--repetition", "1")
    assert code == 2 and "2 attempts match; pick one:" in err
    assert "--implementation python --case 'sorting: size=1000' --repetition 1" in err
    assert "--implementation python --case 'sorting: size=2000' --repetition 1" in err
    code, _, err = _inspect(str(run), "--implementation", "rust")
    assert code == 2 and "no implementation 'rust' in this run; it has: numpy, python" in err
    code, _, err = _inspect(str(run), "--case", "size=3000")
    assert code == 2 and "no case matches --case" in err and "  sorting: size=2000" in err
    code, _, err = _inspect(str(run), "--case", "size")
    assert code == 2  # a bare word names an experiment or case; none is called "size"
    code, _, err = _inspect(str(run), "--task", "t1", "--engine", "chrome", "--attempt", "1")
    assert code == 2 and "this is a compute run" in err
