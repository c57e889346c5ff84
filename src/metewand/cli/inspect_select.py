"""Which attempt ``metewand inspect`` shows: a key, or readable selectors.

Browser runs: ``--task``, ``--engine``, ``--attempt`` (all three). Compute runs:
``--implementation``, ``--case``, ``--repetition`` and ``--attempt`` (the retry index, from 0),
any of them, as long as they leave one measured attempt (``--warmup``: one warm-up attempt). ``--case`` takes what the end-of-run table shows in its case column,
``scaling: distribution=uniform, size=20000``, or any part of it (``size=20000``, ``scaling``,
``dataset=integers``): an optional ``EXPERIMENT:`` prefix, then comma-separated ``NAME=VALUE``
pairs, where NAME is a dataset or problem parameter or one of experiment, case, dataset, problem;
a bare word names the experiment or the case. A selection that matches several attempts is
refused with each candidate spelled as the selectors that pick it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metewand.compare.compute_rows import implementation_of, is_warmup
from metewand.errors import InvalidInput

COORDINATES = ("experiment", "case", "dataset", "problem")
CANDIDATES_SHOWN = 12


class SelectionError(InvalidInput, ValueError):
    """The selectors match no attempt, or more than one (the message says which): exit 2."""


@dataclass(frozen=True)
class ComputeSelection:
    implementation: str | None
    case: tuple[str, ...]
    repetition: int | None
    attempt: int | None
    warmup: bool = False

    def given(self) -> bool:
        numbers = (self.repetition, self.attempt)
        return bool(self.implementation or self.case or self.warmup) or numbers != (None, None)


def parse_case(texts: Sequence[str]) -> dict[str, str]:
    """``["scaling: size=20000, distribution=uniform"]`` -> ``{experiment: scaling, size: ...}``."""
    wanted: dict[str, str] = {}
    for text in texts:
        head, sep, rest = text.partition(":")
        if sep and "=" not in head:
            _put(wanted, "experiment", head.strip(), text)
            text = rest
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, eq, value = part.partition("=")
            if not eq:
                _put(wanted, "", name.strip(), text)  # experiment or case name
            else:
                _put(wanted, name.strip(), value.strip(), text)
    return wanted


def _put(wanted: dict[str, str], name: str, value: str, text: str) -> None:
    if not value or (name and not name.replace("_", "").replace("-", "").isalnum()):
        raise SelectionError(f"--case {text!r}: expected NAME=VALUE pairs, e.g. size=20000")
    if wanted.get(name, value) != value:
        raise SelectionError(f"--case gives {name or 'a name'} twice: {wanted[name]!r}, {value!r}")
    wanted[name] = value


def _case_values(row: Mapping[str, Any]) -> dict[str, str]:
    values = {name: str(row.get(name)) for name in COORDINATES}
    for field in ("problem_parameters", "dataset_parameters"):  # dataset's win a name clash
        params = row.get(field)
        if isinstance(params, Mapping):
            values.update({str(k): str(v) for k, v in params.items()})
    return values


def _case_matches(row: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    values = _case_values(row)
    for name, value in wanted.items():
        if name == "":
            if value not in (values["experiment"], values["case"]):
                return False
        elif values.get(name) != value:
            return False
    return True


def case_text(row: Mapping[str, Any]) -> str:
    """The row's case as ``--case`` takes it back: ``scaling: distribution=uniform, size=20000``."""
    params = dict(row.get("dataset_parameters") or {})
    if row.get("case") not in (None, "default"):
        params["case"] = row.get("case")
    pairs = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"{row.get('experiment')}: {pairs}" if pairs else str(row.get("experiment"))


def selectors_of(row: Mapping[str, Any]) -> str:
    """The readable selectors that pick ``row``, as a user would type them."""
    text = (
        f"--implementation {implementation_of(row)} --case '{case_text(row)}' "
        f"--repetition {row.get('repetition')}"
    )
    text += f" --attempt {row['attempt']}" if row.get("attempt") else ""
    return text + (" --warmup" if is_warmup(row) else "")


def select_compute(
    rows: Sequence[Mapping[str, Any]], chosen: ComputeSelection
) -> Mapping[str, Any]:
    wanted = parse_case(chosen.case)
    found = [
        row
        for row in rows
        if is_warmup(row) == chosen.warmup
        and (chosen.implementation is None or implementation_of(row) == chosen.implementation)
        and (chosen.repetition is None or row.get("repetition") == chosen.repetition)
        and (chosen.attempt is None or row.get("attempt") == chosen.attempt)
        and _case_matches(row, wanted)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise SelectionError(_nothing_matched(rows, chosen, wanted))
    listed = "\n".join(f"  {selectors_of(row)}" for row in found[:CANDIDATES_SHOWN])
    more = (
        f"\n  ... and {len(found) - CANDIDATES_SHOWN} more" if len(found) > CANDIDATES_SHOWN else ""
    )
    raise SelectionError(f"{len(found)} attempts match; pick one:\n{listed}{more}")


def _nothing_matched(
    rows: Sequence[Mapping[str, Any]], chosen: ComputeSelection, wanted: Mapping[str, str]
) -> str:
    """Which selector removed everything, and what the run has instead."""
    implementations = sorted({implementation_of(row) for row in rows})
    if chosen.implementation is not None and chosen.implementation not in implementations:
        return f"no implementation {chosen.implementation!r} in this run; it has: " + ", ".join(
            implementations
        )
    cases = sorted({case_text(row) for row in rows})
    if wanted and not any(_case_matches(row, wanted) for row in rows):
        return "no case matches --case; this run's cases:\n" + "\n".join(f"  {c}" for c in cases)
    repetitions = sorted({str(row.get("repetition")) for row in rows})
    return (
        "no attempt has all of the given selectors; this run's repetitions: "
        + ", ".join(repetitions)
        + ("; --attempt is the retry index, from 0" if chosen.attempt else "")
    )
