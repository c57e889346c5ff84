"""The wheel works outside the checkout (issue #30 item 7): ``python -m build`` on a copy of the
repository, ``pip install`` of the wheel into a fresh venv in another folder, then, from a folder
that is no checkout, ``metewand examples list/copy`` and ``metewand demo --skip-browser`` (which
runs ``metewand run`` on the example packaged inside the wheel).

To stay fast and offline, the wheel is built once (``--no-isolation``: the dev venv's setuptools)
and installed with ``--no-deps`` into a venv that sees the dev venv's site-packages through a
path line (the dev venv's own ``.pth`` files, its editable metewand among them, are not run from
there): every ``metewand`` module then comes from the wheel, its dependencies from the dev venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from doc_commands import make_workspace

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Installed:
    venv: Path
    elsewhere: Path  # a folder outside any checkout to run the commands in

    def metewand(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return subprocess.run(
            [str(self.venv / "bin" / "metewand"), *args],
            cwd=self.elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )


def _run(*argv: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    source = make_workspace(tmp_path_factory.mktemp("checkout"))
    dist = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source)
    (wheel,) = dist.glob("metewand-*.whl")
    venv = tmp_path_factory.mktemp("elsewhere") / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    site = Path(
        _run(
            venv / "bin" / "python",
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ).strip()
    )
    (site / "dev_venv_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        venv / "bin" / "python",
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        wheel,
    )
    elsewhere = venv.parent / "work"
    elsewhere.mkdir()
    return Installed(venv, elsewhere)


def test_metewand_comes_from_the_wheel(installed: Installed) -> None:
    where = _run(
        installed.venv / "bin" / "python", "-c", "import metewand; print(metewand.__file__)"
    )
    assert Path(where.strip()).is_relative_to(installed.venv), where


def test_examples_are_listed_and_copied_from_the_package(installed: Installed) -> None:
    listed = installed.metewand("examples", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("sorting: ")]
    assert lines[at].startswith("sorting: A real computational comparison")
    manifest = Path(lines[at + 1].strip())
    assert manifest.is_relative_to(installed.venv) and manifest.is_file()
    copied = installed.metewand("examples", "copy", "mine")
    assert copied.returncode == 0, copied.stderr
    assert sorted(
        p.name for p in (installed.elsewhere / "mine" / "sorting" / "workers").iterdir()
    ) == sorted(p.name for p in (manifest.parent / "workers").iterdir() if p.name != "__pycache__")
    planned = installed.metewand("plan", "mine/sorting/metewand.toml")
    assert planned.returncode == 0 and " attempts in " in planned.stdout + planned.stderr


def test_demo_skip_browser_runs_the_packaged_example(installed: Installed) -> None:
    done = installed.metewand("demo", "--skip-browser")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (command,) = [line for line in done.stdout.splitlines() if line.startswith("$ metewand run ")]
    packaged = Path(command.split()[3])
    assert packaged.is_relative_to(installed.venv) and packaged.name == "metewand.toml"
    assert "verdict: compute example sorting" in done.stdout
    assert "failures: none" in done.stdout
    (report,) = [
        line.split()[-1]
        for line in done.stdout.splitlines()
        if line.startswith("  report:") and line.endswith("report.html")
    ]
    assert Path(report).is_file() and Path(report).is_relative_to(installed.elsewhere / "runs")
