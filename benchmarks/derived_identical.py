"""Derived files before/after a change: regenerate them from reference run directories with this
tree and compare byte for byte (issue #14: derived files stay identical, modulo times and ids).

Make the reference runs with the old code first (``metewand run`` / ``metewand browser run``),
and, if wanted, ``metewand report`` on a copy of each. Then, with the new code::

    .venv/bin/python benchmarks/derived_identical.py RUN_DIR [RUN_DIR ...] [--report-args ...]

For each RUN_DIR it copies the directory, deletes the derived files the end of a run writes
(scores.json, resource_summary.json, resource-card.md), writes them again with
``compare.generate.write_after_run`` and compares every file of the copy with the original. The
run directory's own path (which report.html names) is the only thing normalised. Exit 1 when any
file differs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from metewand.compare.generate import write_after_run

RUN_END = ("scores.json", "resource_summary.json", "resource-card.md")


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file()}


def compare_dirs(before: Path, after: Path) -> list[str]:
    """Names of the files that differ (or exist on one side only)."""
    differ = []
    for name in sorted(_files(before) | _files(after)):
        a, b = before / name, after / name
        if not (a.is_file() and b.is_file()):
            differ.append(f"{name} (one side only)")
            continue
        left = a.read_bytes().replace(str(before).encode(), b"RUN_DIR")
        right = b.read_bytes().replace(str(after).encode(), b"RUN_DIR")
        if left != right:
            differ.append(str(name))
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="metewand-derived-") as scratch:
        for run in args.runs:
            copy = Path(scratch) / run.name
            shutil.copytree(run, copy)
            for name in RUN_END:
                (copy / name).unlink(missing_ok=True)
            written = sorted(write_after_run(copy))
            differ = compare_dirs(run.absolute(), copy)
            failed += bool(differ)
            print(
                f"{run}: rewrote {written or 'nothing'}; "
                f"{len(_files(copy))} files, {len(differ)} differ {differ or ''}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
