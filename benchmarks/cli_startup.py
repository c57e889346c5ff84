"""How long `metewand --help` and every subcommand's `--help` take: median of 10 each.

Target: <= 0.3 s each on this machine. Each figure is also printed as a ratio to a baseline
measured in the same run: the bare interpreter importing click (`python -c "import click"`),
the least any click-based console script can cost here. The commands are found by walking the
command tree, so a new subcommand is timed without editing this file.

    .venv/bin/python benchmarks/cli_startup.py [--repeat 10] [--limit-s 0.3]

Exits 1 when any median is over the limit.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import click

VENV_BIN = Path(sys.executable).parent


def command_paths() -> list[tuple[str, ...]]:
    from metewand.cli.main import cli

    def walk(command: click.Command, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        found = [path]
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                found += walk(sub, (*path, name))
        return found

    return walk(cli, ())


def median_s(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs per command (median)")
    parser.add_argument("--limit-s", type=float, default=0.3, help="target per --help")
    args = parser.parse_args()
    metewand = str(VENV_BIN / "metewand")
    baseline = median_s([sys.executable, "-c", "import click"], args.repeat)
    print(f"baseline python -c 'import click': {baseline * 1000:.0f} ms (median of {args.repeat})")
    over = []
    for path in command_paths():
        seconds = median_s([metewand, *path, "--help"], args.repeat)
        name = " ".join(("metewand", *path, "--help"))
        verdict = "ok" if seconds <= args.limit_s else "OVER"
        print(
            f"{name:<36} {seconds * 1000:6.0f} ms  x{seconds / baseline:4.1f} baseline  {verdict}"
        )
        if seconds > args.limit_s:
            over.append(name)
    print(f"{len(over)} over {args.limit_s:.2f} s" + (f": {', '.join(over)}" if over else ""))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
