"""The Python worker SDK's import cost is charged to every worker's start-up (each compute attempt
starts an implementation worker and an evaluator), so ``import metewand.worker`` loads only what
the protocol needs: json, hashlib (the result manifest's digests) and the standard library under
them; never typing or the rfc8785 reference canonicaliser (loaded only for values that need it)."""

from __future__ import annotations

import subprocess
import sys

from metewand import canonical

NOT_AT_START_UP = ("typing", "rfc8785", "collections.abc", "numpy", "click", "orjson")
PROBE = f"""
import sys
import metewand.worker
print(",".join(m for m in {NOT_AT_START_UP!r} if m in sys.modules))
"""


def test_importing_the_worker_sdk_loads_no_typing_and_no_reference_canonicaliser() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", PROBE], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "", done.stdout


def test_the_slow_path_still_loads_the_reference_canonicaliser_when_a_value_needs_it() -> None:
    # a key beyond the Basic Multilingual Plane sorts differently in UTF-16: rfc8785 writes it
    probe = (
        "import sys\nfrom metewand import canonical\n"
        "out = canonical.dumps({'\\U0001f600': 1, '\\uffff': 2})\n"
        "print('rfc8785' in sys.modules, out.decode('utf-8'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True
    )
    loaded, text = done.stdout.strip().split(" ", 1)
    assert loaded == "True"
    assert text == canonical.dumps({"\U0001f600": 1, "\uffff": 2}).decode("utf-8")
    assert text.index("\U0001f600") < text.index("\uffff")  # UTF-16 order: a surrogate first
