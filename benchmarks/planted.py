"""A planted slowdown for the compare benchmarks: a copy of a compute example in which one
implementation burns a calibrated extra share of its own execute CPU.

``plant_slowdown(example_dir, implementation, fraction, dest)`` copies ``example_dir`` to
``dest`` and patches the copy only: after the implementation's execute has done its work, a
loop spins on the process's own CPU clock until it has spent ``fraction`` x the CPU that execute
just spent (``time.process_time`` in a Python worker, ``CLOCK_PROCESS_CPUTIME_ID`` in the
example's C worker). The slowdown is therefore +``fraction`` of that implementation's execute CPU
in every case, whatever its size, on any host: calibrated by the work itself, not by a guessed
loop count. The original example is never touched.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

PY_HELPER = '''
import time as _planted_time


def _planted_slowdown(fraction):
    """Planted by benchmarks/planted.py: burn `fraction` x this execute's own CPU after it."""

    def wrap(execute):
        def slowed(values, result_dir):
            start = _planted_time.process_time()
            out = execute(values, result_dir)
            stop = _planted_time.process_time() + fraction * (_planted_time.process_time() - start)
            while _planted_time.process_time() < stop:
                pass
            return out

        return slowed

    return wrap

'''
C_HELPER = """
/* Planted by benchmarks/planted.py: the process's own CPU clock. */
static long long planted_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

"""


def _implementation_file(example_dir: Path, implementation: str) -> tuple[Path, dict]:
    manifest = tomllib.loads((example_dir / "metewand.toml").read_text())
    found = manifest.get("implementations", {}).get(implementation)
    if found is None:
        raise ValueError(f"{example_dir}/metewand.toml names no implementation {implementation!r}")
    if found.get("runner") == "python":
        return Path(found["entrypoint"]), found
    sources = [a for a in found.get("build", []) if str(a).endswith(".c")]
    if len(sources) != 1:
        raise ValueError(f"{implementation}: not a Python worker nor a one-file C build")
    return Path(sources[0]), found


def _patch_python(text: str, fraction: float, where: Path) -> str:
    if text.count("@impl.execute\n") != 1:
        raise ValueError(f"{where}: expected one @impl.execute handler to slow down")
    first = text.index("\nimpl = Implementation()")
    text = text[:first] + "\n" + PY_HELPER + text[first:]
    return text.replace("@impl.execute\n", f"@impl.execute\n@_planted_slowdown({fraction!r})\n")


def _patch_c(text: str, fraction: float, where: Path) -> str:
    start = re.search(r"\n( +)long long start = now_ns\(\);\n", text)
    done = re.search(r"\n( +)long size = write_result\(arg\);\n", text)
    if start is None or done is None or "int main(void)" not in text:
        raise ValueError(f"{where}: not the shape of the example's C worker (execute branch)")
    indent = start.group(1)
    spin = (
        f"{indent}{{ long long planted_stop = planted_cpu_ns() + (long long)({fraction!r} * "
        f"(double)(planted_cpu_ns() - planted_start));\n"
        f"{indent}  while (planted_cpu_ns() < planted_stop) {{ }} }}\n"
    )
    text = text.replace(done.group(0), done.group(0) + spin).replace(
        start.group(0), start.group(0) + f"{indent}long long planted_start = planted_cpu_ns();\n"
    )
    return text.replace("int main(void)", C_HELPER + "int main(void)", 1)


def plant_slowdown(example_dir: Path, implementation: str, fraction: float, dest: Path) -> Path:
    """Copy ``example_dir`` to ``dest`` with ``implementation``'s execute slowed by ``fraction``
    of its own execute CPU. Returns ``dest``. ``dest`` must not exist."""
    if not 0 < fraction <= 10:
        raise ValueError(f"fraction {fraction} must be in (0, 10]")
    example_dir, dest = Path(example_dir), Path(dest)
    relative, _ = _implementation_file(example_dir, implementation)
    shutil.copytree(example_dir, dest, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    target = dest / relative
    text = target.read_text()
    patched = (
        _patch_python(text, fraction, target)
        if target.suffix == ".py"
        else _patch_c(text, fraction, target)
    )
    target.write_text(patched)
    return dest
