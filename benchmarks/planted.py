"""A planted slowdown: a copy of a compute example whose one Python implementation spends
``fraction`` more CPU in its execute request, by a loop calibrated on the request's own CPU time.

``plant_slowdown(example_dir, implementation, fraction, dest)`` copies the example to ``dest``
and patches the copy's worker (never the shipped example): after the worker's execute handler
returns, it keeps the CPU busy until ``fraction`` times the CPU the handler used has passed
(``time.process_time``, this process's CPU clock), so the step is +fraction of execute CPU
whatever the input size. Benchmarks of the history (issue #23) and of compare (issue #22) use it.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

MARK = "# planted by benchmarks/planted.py"
PATCH = """
{mark}: +{fraction} of this implementation's execute CPU, by a calibrated loop
import time as _planted_time

_planted_register = impl.execute


def _planted_execute(handler):
    def burned(*args, **kwargs):
        start = _planted_time.process_time()
        out = handler(*args, **kwargs)
        until = _planted_time.process_time() + (_planted_time.process_time() - start) * {fraction}
        while _planted_time.process_time() < until:
            pass
        return out

    return _planted_register(burned)


impl.execute = _planted_execute
"""


def _entrypoint(manifest: Path, implementation: str) -> Path:
    spec = tomllib.loads(manifest.read_text())
    impls = spec.get("implementations", {})
    if implementation not in impls:
        raise ValueError(f"{manifest}: no implementation {implementation!r} ({', '.join(impls)})")
    entry = impls[implementation]
    if entry.get("runner") != "python":
        raise ValueError(f"{implementation}: only Python workers can be planted (runner "
                         f"{entry.get('runner')!r})")  # fmt: skip
    shared = [name for name, other in impls.items()
              if name != implementation and other.get("entrypoint") == entry["entrypoint"]]  # fmt: skip
    if shared:
        raise ValueError(f"{entry['entrypoint']} also serves {', '.join(shared)}: a patch would "
                         "slow them too")  # fmt: skip
    return manifest.parent / entry["entrypoint"]


def plant_slowdown(
    example_dir: str | Path, implementation: str, fraction: float, dest: str | Path
) -> Path:
    """Copy ``example_dir`` to ``dest`` (replacing it) with ``implementation`` slowed by
    ``fraction`` of its execute CPU; returns the copy's manifest."""
    src, out = Path(example_dir), Path(dest)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = out / "metewand.toml"
    worker = _entrypoint(manifest, implementation)
    code = worker.read_text()
    anchor = "impl = Implementation()\n"
    if anchor not in code or MARK in code:
        raise ValueError(f"{worker}: no '{anchor.strip()}' line to patch after (or patched)")
    worker.write_text(code.replace(anchor, anchor + PATCH.format(mark=MARK, fraction=fraction), 1))
    return manifest
