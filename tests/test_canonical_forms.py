"""Canonical bytes of the three measurement forms and the form rules."""

import pytest

from metewand import canonical
from metewand.measure import forms
from metewand.measure.forms import Reason


def test_three_forms_canonical_bytes() -> None:
    assert (
        canonical.dumps(forms.complete(42000).to_json()) == b'{"status":"complete","value":42000}'
    )
    assert (
        canonical.dumps(forms.partial(12000, Reason.INTERRUPTED).to_json())
        == b'{"reason":"interrupted","status":"partial","value":12000}'
    )
    assert (
        canonical.dumps(forms.unavailable(Reason.NOT_STARTED).to_json())
        == b'{"reason":"not_started","status":"unavailable"}'
    )


def test_zero_is_a_value() -> None:
    m = forms.complete(0)
    assert m.value == 0 and m.has_value


def test_out_of_range_becomes_unavailable() -> None:
    m = forms.complete(canonical.SAFE_INTEGER_MAX + 1)
    assert m.status is forms.Status.UNAVAILABLE and m.reason is Reason.OUT_OF_RANGE
    assert forms.complete(canonical.SAFE_INTEGER_MAX).value == canonical.SAFE_INTEGER_MAX


@pytest.mark.parametrize("value", [0, 1, 2**31, canonical.SAFE_INTEGER_MAX, True, 7.9])
def test_complete_builds_the_form_the_checked_constructor_builds(value: object) -> None:
    # complete() skips the checks for an int in range: same fields, type and bytes as checked
    fast = forms.complete(value, "cgroup2:cpu.stat")  # type: ignore[arg-type]
    checked = forms.Measurement(forms.Status.COMPLETE, int(value), None, "cgroup2:cpu.stat")  # type: ignore[call-overload]
    assert type(fast) is forms.Measurement and type(fast.value) is int
    assert tuple(fast) == tuple(checked)
    assert canonical.dumps(fast.to_json()) == canonical.dumps(checked.to_json())


def test_complete_still_refuses_a_negative_value() -> None:
    with pytest.raises(forms.FormError):
        forms.complete(-1)


@pytest.mark.parametrize(
    "obj",
    [
        {"status": "unavailable", "value": 1, "reason": "not_started"},
        {"status": "complete"},
        {"status": "complete", "value": 1, "reason": "interrupted"},
        {"status": "partial", "value": 1},
        {"status": "partial", "value": 1, "reason": "not_started"},
        {"status": "complete", "value": -1},
        {"status": "complete", "value": 1.5},
        {"status": "unavailable"},
        {"status": "weird", "value": 1},
        {"value": 1},
    ],
)
def test_contradictions_rejected(obj: dict) -> None:
    with pytest.raises(forms.FormError):
        forms.from_json(obj)


def test_identity_shape() -> None:
    ident = canonical.identity("dataset-configuration", {"version": 1, "n": 3})
    assert ident.startswith("mw1-dataset-configuration-") and len(ident.split("-")[-1]) == 64


def test_strict_loads_rejects_duplicates() -> None:
    with pytest.raises(canonical.CanonicalJSONError):
        canonical.loads('{"a":1,"a":2}')
