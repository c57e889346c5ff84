"""``metewand measure``'s two parsers agree: the light one (``cli.measure_options.parse``, no
click, the usual command line) gives exactly the values click gives, or leaves the line to
click (None) — never a different reading. And the console script takes the light path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from metewand.cli.measure_cmd import measure
from metewand.cli.measure_options import OPTIONS, parse

ACCEPTED = [
    ["--", "true"],
    ["--runs", "3", "--", "true"],
    ["-r", "3", "-w", "1", "--", "sleep 0.01", "--", "sleep 0.02"],
    ["-r3", "-w2", "-i", "--", "sh", "-c", "exit 1"],
    ["--runs=4", "--max-time=1.5", "--min-runs", "2", "--max-runs", "9", "--", "true"],
    ["--json", "--pretty", "--time-unit", "microsecond", "--", "true"],
    ["--command-name", "a", "--command-name", "b", "--", "true", "--", "false"],
    ["--setup", "echo s", "--prepare", "echo p", "--cleanup", "echo c", "--", "true"],
    ["--parameter-scan", "n", "1", "3", "--parameter-step-size", "2", "--", "sleep 0.0{n}"],
    ["--parameter-list", "n", "1,2", "--shell", "none", "--", "sleep", "0.0{n}"],
    ["--no-interleave", "--seed", "7", "--", "true", "--", "false"],
    ["--interleave", "--", "true", "--", "false"],
    ["--backend", "proc", "--interval-ms", "50", "--pss-every", "3", "--", "true"],
    ["--mark-fifo", "m.fifo", "--mark-limit", "5", "--", "true"],
    ["--host-sample-interval-s", "0.5", "--host-foreign-cpu-max", "0.3", "--", "true"],
    ["--export-json", "a.json", "--export-csv", "a.csv", "--export-markdown", "a.md", "--", "x"],
    ["--show-output", "--ignore-failure", "--", "true", "--", "--", "false"],
    ["--prepare", "--runs", "--", "true"],  # a value that looks like an option is a value
]
# lines the light parser leaves to click (it says None; click parses or refuses them)
LEFT_TO_CLICK = [
    ["true"],
    ["--runs", "3", "true"],
    ["--runs", "0", "--", "true"],
    ["--runs", "x", "--", "true"],
    ["--max-time", "nan", "--", "true"],
    ["--max-time", "inf", "--", "true"],
    ["--shell", "bash", "--", "true"],
    ["--json=1", "--", "true"],
    ["--unknown", "--", "true"],
    ["-iw2", "--", "true"],
    ["--runs"],
    ["--runs", "--", "true"],
    ["--parameter-scan", "n", "1", "--", "true"],
    ["--help"],
    ["--runs", "3", "--"],
]


def _click(argv: list[str]) -> dict | None:
    try:
        ctx = measure.make_context("measure", list(argv))
    except (click.UsageError, click.exceptions.Exit):
        return None
    return ctx.params


@pytest.mark.parametrize("argv", ACCEPTED, ids=[" ".join(line) for line in ACCEPTED])
def test_the_light_parser_reads_the_usual_lines_as_click_does(argv: list[str]) -> None:
    light = parse(argv)
    assert light is not None, argv
    by_click = _click(argv)
    assert by_click is not None, f"click refuses what the light parser accepted: {argv}"
    assert {**light.values, "command": light.command} == by_click


@pytest.mark.parametrize("argv", LEFT_TO_CLICK, ids=[" ".join(x) for x in LEFT_TO_CLICK])
def test_anything_else_is_left_to_click(argv: list[str]) -> None:
    assert parse(argv) is None  # click decides (its own values or its own error)


def test_refused_values_are_left_to_click_which_refuses_them() -> None:
    for argv in (
        ["--runs", "0", "--", "true"],
        ["--max-time", "nan", "--", "true"],
        ["--mark-limit", "0", "--", "true"],
        ["--export-json", "", "--", "true"],
    ):
        assert parse(argv) is None and _click(argv) is None, argv


def test_every_option_of_the_table_is_a_click_option_with_help() -> None:
    names = {p.name for p in measure.params if isinstance(p, click.Option)}
    assert names == {o.dest for o in OPTIONS}
    assert all(o.help for o in OPTIONS)


def test_the_console_script_runs_measure_without_click_or_orjson(tmp_path: Path) -> None:
    # both cost start-up (item 6 of issue 24): measure's fixed cost is held under 80 ms
    probe = (
        "import sys\nfrom metewand.cli.entry import main\n"
        "sys.argv = ['metewand', 'measure', '--json', '--', 'true']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('click' in sys.modules, 'orjson' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.stderr.strip().splitlines()[-1] == "False False", done.stderr
    bad = subprocess.run(
        [str(Path(sys.executable).with_name("metewand")), "measure", "--runs", "0", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--runs" in bad.stderr and "Traceback" not in bad.stderr
