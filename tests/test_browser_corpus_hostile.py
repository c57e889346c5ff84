"""Issue #12 item 7 (browser tasks): hostile corpus input is refused before a run directory
exists — exit 2 naming the file and the key — by the real CLI on corpora built in tmp."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import ABOUT_BLANK_TASK, cli, run_on_missing_engine, tiny_corpus
from metewand.suites.browser.tasks import load_corpus

PENDING_PROBE = "runner/scripts/no_such_probe.js"  # a probe script metewand has no runner for


def _refused(corpus: Path, tmp_path: Path, *expected: str) -> str:
    """Run the CLI on ``corpus``; it must exit 2, name every ``expected`` text, create nothing."""
    out = tmp_path / "runs"
    done = run_on_missing_engine(corpus, out)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    for text in expected:
        assert text in done.stderr, (text, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    assert not out.exists(), "nothing may be created when the corpus is refused"
    return done.stderr


def _task_with_id(task_id: str) -> dict[str, Any]:
    task = copy.deepcopy(ABOUT_BLANK_TASK)
    task["task_id"] = task_id
    return task


@pytest.mark.parametrize(
    "task_id",
    ["", "..", "<script>", "a\nb", "x" * 10_000_000],
    ids=["empty", "dotdot", "script", "newline", "10MB"],
)
def test_hostile_task_id_is_refused(tmp_path: Path, task_id: str) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": _task_with_id(task_id)})
    stderr = _refused(corpus, tmp_path, "tasks/a.json: $.task_id: must be 1-128 of")
    assert len(stderr) < 10_000, "the error must not echo a huge id"


def test_hostile_task_id_is_refused_even_in_a_subset_not_run_yet(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    manifest = json.loads((corpus / "manifest.json").read_text())
    manifest["layers"][0]["subsets"].append(
        {"subset_id": "t.pw", "driver": "node_cdp_probe", "task_glob": "pw/*.json"}
    )
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    (corpus / "pw").mkdir()
    pending = {"task_id": "../up", "driver": {"kind": "node_cdp_probe", "script": PENDING_PROBE}}
    (corpus / "pw" / "p.json").write_text(json.dumps(pending))
    _refused(corpus, tmp_path, "pw/p.json: $.task_id: must be 1-128 of")


def _corpus_with_route(tmp_path: Path, target: str) -> Path:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    (corpus / "fixtures" / "page.html").write_text("<p>ok</p>")
    routes = {"/page": "page.html", "/evil": target}
    (corpus / "fixtures" / "routes.json").write_text(json.dumps(routes))
    return corpus


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("../manifest.json", "must be a plain relative path inside the fixtures"),
        ("/etc/passwd", "must be a plain relative path inside the fixtures"),
        ("sub/../../manifest.json", "must be a plain relative path inside the fixtures"),
        ("expected_answers.json", "names a registry file"),
        ("l2/expected_answers.fragment.json", "names a registry file"),
        ("page.html.headers.json", "names a registry file"),
        ("gone.html", "is not a fixture file"),
    ],
)
def test_route_entry_outside_or_at_a_registry_file_is_refused(
    tmp_path: Path, target: str, problem: str
) -> None:
    corpus = _corpus_with_route(tmp_path, target)
    fixtures = corpus / "fixtures"
    (fixtures / "expected_answers.json").write_text(json.dumps({"t": {"expected": "secret"}}))
    (fixtures / "l2").mkdir()
    (fixtures / "l2" / "expected_answers.fragment.json").write_text("{}")
    (fixtures / "page.html.headers.json").write_text("{}")
    _refused(corpus, tmp_path, 'fixtures/routes.json: $["/evil"]: route target', problem)


@pytest.mark.parametrize("link_at", ["file", "directory"])
def test_route_through_a_symlink_is_refused(tmp_path: Path, link_at: str) -> None:
    corpus = _corpus_with_route(tmp_path, "placeholder")
    fixtures = corpus / "fixtures"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    if link_at == "file":
        os.symlink(outside / "secret.txt", fixtures / "leak.txt")
        target = "leak.txt"
    else:
        os.symlink(outside, fixtures / "linked")
        target = "linked/secret.txt"
    routes = {"/page": "page.html", "/evil": target}
    (fixtures / "routes.json").write_text(json.dumps(routes))
    _refused(corpus, tmp_path, 'fixtures/routes.json: $["/evil"]', "goes through a symlink")


def test_symlink_inside_the_fixtures_is_refused_too(tmp_path: Path) -> None:
    # A link that points inside today can point anywhere tomorrow: routes never follow one.
    corpus = _corpus_with_route(tmp_path, "alias.html")
    os.symlink(corpus / "fixtures" / "page.html", corpus / "fixtures" / "alias.html")
    _refused(corpus, tmp_path, 'fixtures/routes.json: $["/evil"]', "goes through a symlink")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"t": ', "fixtures/expected_answers.json: $: "),
        ("[1, 2]", "fixtures/expected_answers.json: $: expected a JSON object"),
        ('{"t": {"mode": "bogus", "expected": "x"}}', "$t.mode: unknown mode 'bogus'"),
        ('{"t": {"expected": 7}}', "$t.expected: equals needs a string"),
        ('{"t": "x"}', "$t: expected an object"),
    ],
)
def test_malformed_answers_file_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    (corpus / "fixtures" / "expected_answers.json").write_text(text)
    _refused(corpus, tmp_path, problem)
    assert [e.file for e in load_corpus(corpus).errors] == ["fixtures/expected_answers.json"]


def test_contradicting_answer_fragments_are_refused(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    fixtures = corpus / "fixtures"
    (fixtures / "expected_answers.json").write_text(json.dumps({"t": {"expected": "a"}}))
    (fixtures / "x").mkdir()
    fragment = fixtures / "x" / "expected_answers.fragment.json"
    fragment.write_text(json.dumps({"t": {"expected": "b"}}))
    _refused(corpus, tmp_path, "fixtures/x/expected_answers.fragment.json", "contradicts")


def test_malformed_answers_refused_even_with_keep_going(tmp_path: Path) -> None:
    # --keep-going skips invalid task files, but the fixture server needs its registries whole.
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    (corpus / "fixtures" / "expected_answers.json").write_text("{oops")
    out = tmp_path / "runs"
    done = run_on_missing_engine(corpus, out, "--keep-going")
    assert done.returncode == 2, done.stderr
    assert "fixtures/expected_answers.json" in done.stderr and not out.exists()


@pytest.mark.parametrize(
    "glob",
    ["tasks/../../*.json", "../outside/*.json", "/etc/*.json", "tasks/**/../*.json", ""],
)
def test_task_glob_leaving_the_corpus_is_refused(tmp_path: Path, glob: str) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    manifest = json.loads((corpus / "manifest.json").read_text())
    manifest["layers"][0]["subsets"].append(
        {"subset_id": "t.escape", "driver": "raw_cdp", "task_glob": glob}
    )
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    _refused(corpus, tmp_path, "manifest.json: $.layers[0].subsets[1].task_glob: must")


def test_browser_list_shows_the_same_problems(tmp_path: Path) -> None:
    corpus = _corpus_with_route(tmp_path, "../manifest.json")
    done = cli("browser", "list", "--tasks", str(corpus))
    assert done.returncode == 0, done.stderr
    assert "1 invalid" in done.stdout
    assert 'invalid: fixtures/routes.json: $["/evil"]: route target' in done.stdout


def test_corpus_without_fixtures_dir_is_refused(tmp_path: Path) -> None:
    # Every run starts the fixture server on fixtures/: without it the server cannot start.
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    (corpus / "fixtures" / "routes.json").unlink()
    (corpus / "fixtures").rmdir()
    _refused(corpus, tmp_path, "fixtures: $: required directory missing")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[1]", "$: must be an object"),
        ('{"X-A": 1}', '$["X-A"]: a header value must be'),
        ('{"X-A": "a\\r\\nSet-Cookie: x=1"}', '$["X-A"]: a header value must be'),
        ("{", "$: invalid"),
    ],
)
def test_malformed_headers_sidecar_is_refused(tmp_path: Path, text: str, where: str) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    (corpus / "fixtures" / "page.html").write_text("<p>ok</p>")
    (corpus / "fixtures" / "page.html.headers.json").write_text(text)
    _refused(corpus, tmp_path, f"fixtures/page.html.headers.json: {where}")
