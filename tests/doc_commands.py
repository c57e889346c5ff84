"""The commands the documentation promises: README.md's ``sh`` blocks and every ``--help``'s
Examples block, and a scratch copy of the repository to run them in, as a new user would.

The copy holds the tracked files (not runs/, caches or the .venv); its ``.venv`` is a link to
the real one and ``../shared`` beside it a link to the real ``../shared``, so the documented
relative paths mean what they mean in a fresh clone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import click

from shared_paths import REPO_ROOT, SHARED

COMMENT = re.compile(r"\s+#\s.*$")  # a trailing "  # explanation"
IGNORED = shutil.ignore_patterns(
    ".venv",
    "runs",
    ".git",
    "__pycache__",
    "*.egg-info",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "build",
    "dist",
    "node_modules",
    "history.duckdb*",  # node_modules: the driver clients (untracked, ~57 MB)
)


def _logical_lines(lines: list[str]) -> list[str]:
    """Backslash continuations joined, comments and blank lines dropped."""
    commands, pending = [], ""
    for raw in lines:
        line = raw.strip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line = COMMENT.sub("", pending + line).strip()
        pending = ""
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


def readme_commands(readme: Path = REPO_ROOT / "README.md") -> list[str]:
    blocks = re.findall(r"^```sh\n(.*?)^```", readme.read_text(encoding="utf-8"), re.M | re.S)
    return [c for block in blocks for c in _logical_lines(block.splitlines())]


def _walk(command: click.Command, path: tuple[str, ...] = ()) -> list[click.Command]:
    found = [command]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            found += _walk(sub, (*path, name))
    return found


def help_examples() -> list[str]:
    """Every line of every Examples block (commands start with ``metewand`` or ``cd``)."""
    from metewand.cli.main import cli

    examples = []
    for command in _walk(cli):
        text = f"{command.help or ''}\n{command.epilog or ''}"
        if "Examples:" not in text:
            continue
        block = text.split("Examples:", 1)[1]
        lines = []
        for line in block.splitlines()[1:]:
            if not line.strip() or line.strip() == "\b":  # the block ends at a blank or \b
                break
            lines.append(line)
        examples += _logical_lines(lines)
    return examples


def normalized(command: str) -> str:
    """README spells the console script ``.venv/bin/metewand``; --help spells ``metewand``."""
    return command.replace(".venv/bin/metewand", "metewand")


def make_workspace(root: Path) -> Path:
    """A copy of the repository at ``root/metewand`` with ``.venv`` and ``../shared`` linked."""
    repo = root / "metewand"
    shutil.copytree(REPO_ROOT, repo, ignore=IGNORED, symlinks=True)
    (repo / ".venv").symlink_to(REPO_ROOT / ".venv")
    if SHARED.exists():
        (root / "shared").symlink_to(SHARED)
    return repo


def run_in(repo: Path, command: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``command`` as a user types it in a shell at the repository root (metewand on PATH)."""
    env = dict(os.environ)
    env["PATH"] = f"{repo / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("NO_COLOR", None)
    env.pop("METEWAND_HISTORY", None)  # a new user's runs add to history.duckdb beside runs/
    return subprocess.run(
        ["bash", "-c", command],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
