"""``benchmarks/peer_statuses.py``: harness_vs_peer.py's status agreement. A disagreement listed
in ``benchmarks/peer_disagreements.json`` (examined: the peer's status is the wrong one) is told
apart from any other, which is a changed status and is named; a listed one that no longer
disagrees as listed is named too."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from browser_run_helpers import lexbench_or_skip

REPO = Path(__file__).resolve().parents[1]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "peer_statuses", REPO / "benchmarks" / "peer_statuses.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


statuses = _module()


def test_every_listed_disagreement_names_a_corpus_task_and_its_reason() -> None:
    corpus = lexbench_or_skip()
    known = statuses.load_known()
    assert known
    for (task_id, engine), entry in known.items():
        assert list((corpus / "tasks").rglob(f"{task_id}.json")), task_id
        assert engine in ("chrome", "lightpanda")
        assert entry["ours"] != entry["peer"]
        assert len(entry["why"]) > 40


def test_agreeing_listed_and_unexplained_statuses_are_told_apart() -> None:
    known = {("t_known", "lightpanda"): {"ours": "fail", "peer": "pass", "why": "-"}}
    ours = {"t_same": "pass", "t_known": "fail", "t_new": "fail", "only_ours": "pass"}
    peer = {"t_same": "pass", "t_known": "pass", "t_new": "pass"}
    seen = statuses.compare("lightpanda", ours, peer, known)
    assert (seen.agree, seen.known, seen.unexplained, seen.stale) == (
        1,
        ["t_known"],
        ["t_new: ours fail, peer pass"],
        [],
    )
    assert seen.brief() == "1/3 (+1 known) !1 unexplained"
    # the same task on the other engine is not the listed disagreement
    other = statuses.compare("chrome", ours, peer, known)
    assert other.known == [] and len(other.unexplained) == 2


def test_a_listed_disagreement_that_changed_is_named() -> None:
    known = {("t", "chrome"): {"ours": "fail", "peer": "pass", "why": "-"}}
    agrees = statuses.compare("chrome", {"t": "pass"}, {"t": "pass"}, known)
    assert (agrees.agree, agrees.stale) == (1, ["t on chrome: ours pass, peer pass"])
    flipped = statuses.compare("chrome", {"t": "pass"}, {"t": "fail"}, known)
    assert flipped.unexplained == ["t: ours pass, peer fail"] and flipped.stale


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "cannot read its 'disagreements' list"),
        ('{"disagreements": [{"task_id": "t", "engine": "chrome"}]}', "[0] has no ours, peer, why"),
        (
            json.dumps({"disagreements": [dict.fromkeys(statuses.FIELDS, "x")] * 2}),
            "[1] lists x on x again",
        ),
    ],
)
def test_a_malformed_list_is_refused_by_file_and_entry(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "peer_disagreements.json"
    path.write_text(content)
    with pytest.raises(SystemExit) as refused:
        statuses.load_known(path)
    assert str(path) in str(refused.value) and message in str(refused.value)
