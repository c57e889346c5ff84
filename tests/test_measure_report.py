"""``metewand measure`` as a hyperfine user expects it (issue 30) and interleaved by default
(issue 22): --setup/--prepare/--cleanup in their order, --command-name, --time-unit,
--json --pretty, the progress line with the time left on a terminal, the note when CPU exceeds
wall, and the rounds of the interleaved design. Real processes."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from metewand import canonical
from metewand.cli.measure_render import cpu_over_wall_note
from metewand.runtime import schemas

METEWAND = str(Path(sys.executable).with_name("metewand"))


def measure(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [METEWAND, "measure", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


HELPERS = [
    "--setup",
    "echo setup-{n} >> log",
    "--prepare",
    "echo prep-{n} >> log",
    "--cleanup",
    "echo clean-{n} >> log",
    "--parameter-list",
    "n",
    "a,b",
    "--command-name",
    "cmd {n}",
]


def test_helpers_run_in_order_around_interleaved_rounds(tmp_path: Path) -> None:
    done = measure(
        "--runs",
        "3",
        "--warmup",
        "1",
        "--json",
        *HELPERS,
        "--",
        "echo run-{n} >> log",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "log").read_text().split()
    assert log[:2] == ["setup-a", "setup-b"] and log[-2:] == ["clean-a", "clean-b"]
    middle = log[2:-2]
    assert len(middle) == 2 * 2 * 4  # (prepare + run) x 2 commands x (1 warm-up + 3 rounds)
    assert all(p == f"prep-{r[-1]}" for p, r in zip(middle[::2], middle[1::2], strict=True))
    result = canonical.loads(done.stdout)
    assert schemas.violations("metewand_measure_series-2", result) == []
    assert result["design"] == "interleaved" and len(result["rounds"]) == 3
    order = [f"run-{'ab'[i]}" for round_ in result["rounds"] for i in round_]
    assert [w for w in middle[1::2]][2:] == order  # the recorded order is the order run
    assert [c["name"] for c in result["commands"]] == ["cmd a", "cmd b"]
    assert result["commands"][1]["setup"] == ["sh", "-c", "echo setup-b >> log"]


def test_helpers_run_per_command_when_not_interleaved(tmp_path: Path) -> None:
    done = measure(
        "--runs", "2", "--no-interleave", *HELPERS, "--", "echo run-{n} >> log", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "log").read_text().split()
    one = ["setup-{}", "prep-{}", "run-{}", "prep-{}", "run-{}", "clean-{}"]
    assert log == [w.format("a") for w in one] + [w.format("b") for w in one]
    assert "ratio of medians; the commands ran one after the other" in done.stdout
    assert "Command 1: cmd a  (echo run-a >> log)" in done.stdout


def test_a_failing_helper_stops_with_its_name_and_cleanup_still_runs(tmp_path: Path) -> None:
    done = measure(
        "--runs",
        "2",
        "--prepare",
        "exit 3",
        "--cleanup",
        "echo clean >> log",
        "--",
        "true",
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "--prepare command 'exit 3' exited with status 3" in done.stderr
    assert (tmp_path / "log").read_text().split() == ["clean"]


def test_counts_of_names_and_helpers_must_match_the_commands(tmp_path: Path) -> None:
    for args in (
        ["--command-name", "a", "--command-name", "b"],
        ["--setup", "true", "--setup", "true", "--setup", "true"],
        ["--pretty"],
    ):
        done = measure("--runs", "2", *args, "--", "touch ran", cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (args, done.stderr)
    assert not (tmp_path / "ran").exists()


def test_time_unit_pretty_json_and_names_in_every_output(tmp_path: Path) -> None:
    done = measure(
        "--runs",
        "6",
        "--time-unit",
        "second",
        "--command-name",
        "nothing",
        "--export-markdown",
        "r.md",
        "--",
        "true",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    wall = next(line for line in done.stdout.splitlines() if line.startswith("  wall time"))
    assert wall.split()[2:4][1] == "s", wall  # "0.000 s [0.000 s – ...]"
    assert "Command 1: nothing  (true)" in done.stdout
    assert (
        " s [" in (tmp_path / "r.md").read_text() and "`nothing`" in (tmp_path / "r.md").read_text()
    )
    pretty = measure("--runs", "2", "--json", "--pretty", "--", "true", cwd=tmp_path)
    assert pretty.returncode == 0 and pretty.stdout.count("\n") > 20
    assert json.loads(pretty.stdout)["schema"] == "metewand_measure_series/2"
    single = measure("--json", "--pretty", "--command-name", "t", "--", "true", cwd=tmp_path)
    parsed = json.loads(single.stdout)
    assert parsed["command_name"] == "t" and parsed["wall_time_ns"]["status"] == "complete"


def test_the_note_when_cpu_exceeds_wall_follows_the_figures(tmp_path: Path) -> None:
    done = measure("--runs", "6", "--export-json", "r.json", "--", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    wall, cpu = (
        canonical.loads((tmp_path / "r.json").read_bytes())["summaries"][0]["metrics"][m]["median"]
        for m in ("wall_time_ns", "cpu_time_ns")
    )
    assert ("note: CPU is" in done.stdout) == (cpu > wall), (cpu, wall, done.stdout)
    assert cpu_over_wall_note(5e6, 10e6, 1) is None
    short = cpu_over_wall_note(1.5e6, 0.5e6, 1)
    assert short and "exec and exit work" in short and "up to" not in short
    parallel = cpu_over_wall_note(2e9, 1e9, 3)
    assert parallel and "more than one core" in parallel and "up to 3 processes" in parallel


def test_a_terminal_gets_a_progress_line_with_the_time_left(tmp_path: Path) -> None:
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [METEWAND, "measure", "--runs", "8", "--", "sleep 0.15"],
        stdout=subprocess.PIPE,
        stderr=child,
        cwd=tmp_path,
    )
    os.close(child)
    seen = b""
    while True:
        ready, _, _ = select.select([main], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the terminal's other end closed: metewand is done
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=60)
    os.close(main)
    assert proc.returncode == 0
    text = seen.decode()
    assert "[1/1] sleep 0.15: run 3/8 (" in text and "runs, about 0:0" in text, text
    assert text.endswith("\r\x1b[K")  # erased before the report, which is on stdout
    assert b"Command 1: sleep 0.15" in out
    piped = measure("--runs", "2", "--", "true", cwd=tmp_path)
    assert "about" not in piped.stderr and "\r" not in piped.stderr  # no terminal, no line
