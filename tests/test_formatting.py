"""The formatter is adopted whole: `ruff format --check` runs in `make test`, and nothing in the
tree opts out of it (issue #28: 636 opt-out comments had grown around hand-aligned tables)."""

from __future__ import annotations

import re

from shared_paths import REPO_ROOT

OPT_OUT = re.compile(r"#\s*fmt:\s*(skip|off)\b")


def test_no_file_opts_out_of_the_formatter() -> None:
    found = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for top in ("src", "tests", "benchmarks")
        for path in sorted((REPO_ROOT / top).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if OPT_OUT.search(line) and path.name != "test_formatting.py"
    ]
    assert found == []
