"""issue 6 §4: every command's --help has examples, read-only commands speak --json, exit codes
follow README's table, colours only on a terminal (and never with NO_COLOR)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from compute_helpers import problem, python_impl, write_manifest
from metewand.cli.main import cli
from metewand.cli.progress import Progress

READ_ONLY = [
    ("schema",),
    ("status",),
    ("plan",),
    ("browser", "list"),
    ("browser", "doctor"),
    ("doctor",),
    ("inspect",),
    ("report",),
]
COLOUR = re.compile(rb"\x1b\[(?:3\d|9\d|38;)[0-9;]*m")  # SGR foreground colours


def _walk(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    ctx = click.Context(group)
    found = [path]
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found += _walk(command, (*path, name))
        else:
            found.append((*path, name))
    return found


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None
        command = found
    return command


def test_every_help_has_an_examples_block() -> None:
    paths = _walk(cli)
    assert ("browser", "run") in paths and ("run",) in paths  # the walk reaches subgroups
    for path in paths:
        result = CliRunner().invoke(cli, [*path, "--help"], prog_name="metewand")
        assert result.exit_code == 0, (path, result.output)
        block = result.output.split("Examples:", 1)
        assert len(block) == 2, f"metewand {' '.join(path)} --help has no Examples block"
        assert "metewand " in block[1].splitlines()[1], f"{path}: an example must be a command"


@pytest.mark.parametrize("path", READ_ONLY, ids=" ".join)
def test_read_only_commands_have_json(path: tuple[str, ...]) -> None:
    options = {opt for param in _command(path).params for opt in getattr(param, "opts", [])}
    assert "--json" in options


def _metewand(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metewand", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args",
    [["status"], ["export"], ["report"], ["inspect", "--key", "a/b"], ["run", "--resume"]],
    ids=lambda a: a[0],
)
def test_not_a_run_directory_is_invalid_input(args: list[str], tmp_path: Path) -> None:
    done = _metewand(*args, str(tmp_path))
    assert done.returncode == 2, done.stderr  # README: 2 = invalid input, nothing was run
    assert done.stderr.startswith("error:")


def test_missing_manifest_is_invalid_input(tmp_path: Path) -> None:
    for command in ("plan", "run"):
        done = _metewand(command, str(tmp_path / "absent.toml"))
        assert done.returncode == 2, done.stderr


def _progress_on_a_terminal() -> tuple[str, bytes]:
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as stream:
        progress = Progress(2, mode="auto", stream=stream)
        progress.start()
        for status in ("pass", "fail"):
            progress.attempt_started("task x chrome #0")
            progress.attempt_finished(status)
        progress.close()
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side is closed and drained
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return progress.mode, out


def test_colours_only_on_a_terminal_and_never_with_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    mode, out = _progress_on_a_terminal()
    assert mode == "rich" and COLOUR.search(out)  # a real terminal gets the coloured bar
    assert b"attempts by status" in out
    monkeypatch.setenv("NO_COLOR", "1")
    mode, out = _progress_on_a_terminal()
    assert mode == "rich" and not COLOUR.search(out)


def test_compute_run_off_a_terminal_has_plain_lines_and_no_escapes(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        problem()
        + python_impl("a", "ok")
        + """
[[experiments]]
name = "e"
problem = "answer"
implementations = ["a"]
repetitions = 2
""",
    )
    done = _metewand(
        "run",
        str(manifest),
        "--out",
        str(tmp_path / "runs"),
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stderr + done.stdout
    assert re.search(r"^\[2/2\] accepted=2 eta \S+ current \S+", done.stderr, re.M), done.stderr
    assert "attempts by status" in done.stderr
    quiet = _metewand(
        "run",
        str(manifest),
        "--out",
        str(tmp_path / "runs"),
        "--quiet",
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert quiet.stdout.startswith("run directory: ")
