"""Provenance: host facts from the real machine, and a source hash that sees every edit."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from metewand import canonical
from metewand.runtime import provenance


def _tree_copy(tmp_path: Path) -> Path:
    root = tmp_path / "metewand"
    shutil.copytree(provenance.package_root(), root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_tree_hash_follows_content_and_paths(tmp_path: Path) -> None:
    root = _tree_copy(tmp_path)
    first = provenance.source_tree(root)
    assert first["schema"] == "abb_runner_source/1"
    assert first["file_count"] == len(first["files"]) > 10
    assert any(f["path"] == "runtime/provenance.py" for f in first["files"])
    assert any(f["path"].startswith("schemas/") for f in first["files"])

    target = root / "runtime" / "store.py"
    target.write_text(target.read_text() + "\n# an uncommitted edit\n")
    edited = provenance.source_tree(root)
    assert edited["tree_sha256"] != first["tree_sha256"]

    target.rename(root / "runtime" / "store_moved.py")
    moved = provenance.source_tree(root)
    assert moved["tree_sha256"] not in (first["tree_sha256"], edited["tree_sha256"])

    (root / "runtime" / "__pycache__").mkdir()
    (root / "runtime" / "__pycache__" / "x.py").write_text("ignored")
    (root / "notes.bin").write_bytes(b"\0")
    assert provenance.source_tree(root)["tree_sha256"] == moved["tree_sha256"]


def test_tree_hash_is_the_documented_digest(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "b").mkdir(parents=True)
    (root / "a.py").write_bytes(b"x = 1\n")
    (root / "b" / "c.json").write_bytes(b"{}")
    lines = b""
    for rel, content in (("a.py", b"x = 1\n"), ("b/c.json", b"{}")):
        lines += f"{rel}\0{hashlib.sha256(content).hexdigest()}\n".encode()
    tree = provenance.source_tree(root, list_files=False)
    assert tree == {
        "schema": "abb_runner_source/1",
        "tree_sha256": hashlib.sha256(lines).hexdigest(),
        "file_count": 2,
    }


def test_host_facts_come_from_this_machine() -> None:
    facts = provenance.host_facts()
    assert facts["cpu_count"] == os.cpu_count()
    assert facts["kernel"].endswith(os.uname().release)
    assert isinstance(facts["memory_bytes"], int) and facts["memory_bytes"] > 0
    governor = facts["cpu_governor"]
    assert set(governor) & {"all", "per_cpu", "unavailable"}
    if "unavailable" in governor:
        assert governor["unavailable"]  # a reason, never an empty placeholder
    layout = facts["cgroup_layout"]
    assert "v2" in layout and "v1" in layout
    canonical.dumps(provenance.collect())  # the whole record is canonical JSON


def test_git_state_outside_a_checkout_is_unavailable(tmp_path: Path) -> None:
    assert "unavailable" in provenance.git_state(tmp_path)
    here = provenance.git_state()  # the tests run from a checkout
    assert len(here["commit"]) == 40 and isinstance(here["dirty"], bool)
